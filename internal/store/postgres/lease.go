package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlstore"
)

// ClaimJob leases the oldest pending job to owner until now+lease. Pending
// jobs another transaction holds are skipped (FOR UPDATE SKIP LOCKED), so
// claimers never wait on each other nor take the same job.
func (s *Store) ClaimJob(ctx context.Context, owner string, lease time.Duration) (store.Job, error) {
	var out store.Job
	err := s.write(ctx, func(tx pgx.Tx) error {
		j, err := sqlstore.Scan(tx.QueryRow(ctx, claimSQL))
		if errors.Is(err, pgx.ErrNoRows) {
			if _, err := tx.Exec(ctx, claimWaitLimit); err != nil {
				return err
			}
			j, err = sqlstore.Scan(tx.QueryRow(ctx, claimWaitSQL))
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == lockNotAvailable {
				err = pgx.ErrNoRows // still locked: someone holds it for long
			}
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNoJob
		}
		if err != nil {
			return err
		}
		sqlstore.Claim(&j, owner, lease)
		out = j
		return save(ctx, tx, &out)
	})
	if err != nil {
		return store.Job{}, fmt.Errorf("claim job: %w", err)
	}
	return out, nil
}

// lockNotAvailable is PostgreSQL's error code for a lock_timeout.
const lockNotAvailable = "55P03"

// Heartbeat extends owner's lease of a running job to now+lease.
func (s *Store) Heartbeat(ctx context.Context, id, owner string, lease time.Duration) (store.Job, error) {
	var out store.Job
	err := s.leased(ctx, id, owner, func(j *store.Job) {
		sqlstore.Extend(j, lease)
		out = *j
	})
	if err != nil {
		return store.Job{}, fmt.Errorf("heartbeat job %s: %w", id, err)
	}
	return out, nil
}

// Release gives owner's running job back to pending, not counting the run.
func (s *Store) Release(ctx context.Context, id, owner string) error {
	if err := s.leased(ctx, id, owner, sqlstore.Release); err != nil {
		return fmt.Errorf("release job %s: %w", id, err)
	}
	return nil
}

// leased applies fn to job id and saves it, if the job is running under
// owner's lease; otherwise it is ErrLeaseLost (ErrNotFound for no job).
func (s *Store) leased(ctx context.Context, id, owner string, fn func(*store.Job)) error {
	return s.write(ctx, func(tx pgx.Tx) error {
		j, err := load(ctx, tx, id)
		if err != nil {
			return err
		}
		if j.Status != store.StatusRunning || j.LeaseOwner != owner {
			return store.ErrLeaseLost
		}
		fn(&j)
		return save(ctx, tx, &j)
	})
}

// RequeueExpired puts back running jobs whose lease ended before now or
// whose owner is reclaim: to pending, or to error once they used
// MaxAttempts. It returns them as they were before.
func (s *Store) RequeueExpired(ctx context.Context, now time.Time, reclaim string) ([]store.Job, error) {
	var before []store.Job
	err := s.write(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, expiredSQL, sqlstore.Nanos(now), reclaim)
		if err != nil {
			return err
		}
		if before, err = collectJobs(rows); err != nil {
			return err
		}
		for _, j := range before {
			sqlstore.Requeue(&j, now)
			if err := save(ctx, tx, &j); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("requeue expired jobs: %w", err)
	}
	return before, nil
}

// collectJobs reads rows of selectJob and closes them.
func collectJobs(rows pgx.Rows) ([]store.Job, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Job, error) { return sqlstore.Scan(r) })
}
