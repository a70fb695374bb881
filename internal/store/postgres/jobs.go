package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlstore"
)

// CreateJob inserts j. An empty Status becomes pending, a zero CreatedAt
// now, a zero UpdatedAt CreatedAt. A job with j's ID already stored is
// ErrConflict. It is one statement: a concurrent create with the same
// idempotency key waits for the first to commit, then replays it.
func (s *Store) CreateJob(ctx context.Context, j store.Job) (store.Job, bool, error) {
	if j.ID == "" {
		return store.Job{}, false, errors.New("create job: empty id")
	}
	sqlstore.PrepareNew(&j)
	args, err := sqlstore.Args(&j)
	if err != nil {
		return store.Job{}, false, fmt.Errorf("create job: %w", dbErr(err))
	}
	tag, err := s.pool.Exec(ctx, insertJobSQL, args...)
	if err != nil {
		return store.Job{}, false, fmt.Errorf("create job: %w", dbErr(err))
	}
	if tag.RowsAffected() == 1 {
		return j, true, nil
	}
	old, err := s.byKey(ctx, j)
	if err != nil {
		return store.Job{}, false, fmt.Errorf("create job: %w", dbErr(err))
	}
	return old, false, nil
}

// byKey is the stored job whose idempotency key is j's, if j's request
// hash matches; ErrConflict if it does not, or if no job has the key (the
// insert then met j's ID).
func (s *Store) byKey(ctx context.Context, j store.Job) (store.Job, error) {
	if j.IdempotencyKey == "" {
		return store.Job{}, fmt.Errorf("job %s exists: %w", j.ID, store.ErrConflict)
	}
	old, err := sqlstore.Scan(s.pool.QueryRow(ctx, jobByKeySQL, j.IdempotencyKey))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Job{}, fmt.Errorf("job %s exists: %w", j.ID, store.ErrConflict)
	}
	if err != nil {
		return store.Job{}, err
	}
	return old, sqlstore.Replay(old, j.RequestHash)
}

// GetJob returns the job with id, or ErrNotFound.
func (s *Store) GetJob(ctx context.Context, id string) (store.Job, error) {
	j, err := sqlstore.Scan(s.pool.QueryRow(ctx, getJobSQL, id))
	if err != nil {
		return store.Job{}, fmt.Errorf("get job %s: %w", id, dbErr(err))
	}
	return j, nil
}

// UpdateJob loads the job, applies fn and saves the result in one
// transaction holding the job's row lock. Changes fn makes to ID,
// CreatedAt, IdempotencyKey, RequestHash and Task are ignored; UpdatedAt is
// set to now. fn must be quick and must not write through the store.
func (s *Store) UpdateJob(ctx context.Context, id string, fn func(*store.Job) error) (store.Job, error) {
	j, _, err := s.UpdateJobLogged(ctx, id, func(j *store.Job) ([]store.Entry, error) { return nil, fn(j) })
	return j, err
}

// UpdateJobLogged is UpdateJob that appends the entries fn returns to the
// job's log in the same transaction, each payload valid JSON or empty.
func (s *Store) UpdateJobLogged(ctx context.Context, id string, fn func(*store.Job) ([]store.Entry, error)) (store.Job, []store.Event, error) {
	var out store.Job
	var evs []store.Event
	err := s.write(ctx, func(tx pgx.Tx) error {
		j, err := load(ctx, tx, id)
		if err != nil {
			return err
		}
		next := j
		entries, err := fn(&next)
		if err != nil {
			return userError{err}
		}
		out = sqlstore.Updated(j, next)
		if err := save(ctx, tx, &out); err != nil {
			return err
		}
		evs, err = appendAll(ctx, tx, id, entries)
		return err
	})
	var ue userError
	if errors.As(err, &ue) {
		return store.Job{}, nil, ue.err
	}
	if err != nil {
		return store.Job{}, nil, fmt.Errorf("update job %s: %w", id, err)
	}
	return out, evs, nil
}

// userError carries an error of UpdateJob's fn out of the transaction
// unwrapped.
type userError struct{ err error }

func (e userError) Error() string { return e.err.Error() }

// load reads and locks a job inside a transaction.
func load(ctx context.Context, tx pgx.Tx, id string) (store.Job, error) {
	j, err := sqlstore.Scan(tx.QueryRow(ctx, lockJobSQL, id))
	return j, dbErr(err)
}

// save writes every mutable column of j.
func save(ctx context.Context, tx pgx.Tx, j *store.Job) error {
	sqlstore.Normalize(j)
	j.Result, j.Error = pgText(j.Result), pgText(j.Error)
	args, err := sqlstore.UpdateArgs(j)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, updateJobSQL, args...)
	return err
}

// CountByStatus counts jobs in each of the five statuses, zeros included.
func (s *Store) CountByStatus(ctx context.Context) (map[store.Status]int, error) {
	counts := map[store.Status]int{
		store.StatusPending: 0, store.StatusRunning: 0,
		store.StatusComplete: 0, store.StatusError: 0, store.StatusCanceled: 0,
	}
	rows, err := s.pool.Query(ctx, "SELECT status, COUNT(*) FROM jobs GROUP BY status")
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	var st string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&st, &n}, func() error {
		counts[store.Status(st)] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	return counts, nil
}

// pgText is s with U+FFFD in place of what PostgreSQL's text refuses (NUL,
// bytes that are not UTF-8): a job's result and error hold what the model
// and the sandbox said, and the job must end all the same.
func pgText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
