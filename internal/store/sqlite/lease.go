package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlstore"
)

const claimSQL = "SELECT id FROM jobs WHERE status = 'pending' ORDER BY created_at, id LIMIT 1"

// ClaimJob leases the oldest pending job to owner until now+lease.
func (s *Store) ClaimJob(ctx context.Context, owner string, lease time.Duration) (store.Job, error) {
	var out store.Job
	err := s.write(ctx, func(tx *sql.Tx) error {
		var id string
		if err := tx.QueryRowContext(ctx, claimSQL).Scan(&id); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return store.ErrNoJob
			}
			return err
		}
		j, err := s.load(ctx, tx, id)
		if err != nil {
			return err
		}
		sqlstore.Claim(&j, owner, lease)
		out = j
		return s.save(ctx, tx, &out)
	})
	if err != nil {
		return store.Job{}, fmt.Errorf("claim job: %w", err)
	}
	return out, nil
}

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
	err := s.leased(ctx, id, owner, sqlstore.Release)
	if err != nil {
		return fmt.Errorf("release job %s: %w", id, err)
	}
	return nil
}

// leased applies fn to job id and saves it, if the job is running under
// owner's lease; otherwise it is ErrLeaseLost (ErrNotFound for no job).
func (s *Store) leased(ctx context.Context, id, owner string, fn func(*store.Job)) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		j, err := s.load(ctx, tx, id)
		if err != nil {
			return err
		}
		if j.Status != store.StatusRunning || j.LeaseOwner != owner {
			return store.ErrLeaseLost
		}
		fn(&j)
		return s.save(ctx, tx, &j)
	})
}

const expiredSQL = "SELECT id FROM jobs WHERE status = 'running' AND (lease_until < ? OR (? != '' AND lease_owner = ?))"

// RequeueExpired puts back running jobs whose lease ended before now or
// whose owner is reclaim: to pending, or to error once they used
// MaxAttempts. It returns them as they were before.
func (s *Store) RequeueExpired(ctx context.Context, now time.Time, reclaim string) ([]store.Job, error) {
	var before []store.Job
	err := s.write(ctx, func(tx *sql.Tx) error {
		ids, err := queryIDs(ctx, tx, expiredSQL, nanos(now), reclaim, reclaim)
		if err != nil {
			return err
		}
		before = before[:0]
		for _, id := range ids {
			j, err := s.load(ctx, tx, id)
			if err != nil {
				return err
			}
			before = append(before, j)
			sqlstore.Requeue(&j, now)
			if err := s.save(ctx, tx, &j); err != nil {
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

func queryIDs(ctx context.Context, tx *sql.Tx, q string, args ...any) ([]string, error) {
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
