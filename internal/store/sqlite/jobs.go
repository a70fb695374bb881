package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlstore"
	sqlite3 "modernc.org/sqlite/lib"

	sqlitedrv "modernc.org/sqlite"
)

// CreateJob inserts j. An empty Status becomes pending, a zero CreatedAt
// now, a zero UpdatedAt CreatedAt. A job with j's ID already stored is
// ErrConflict.
func (s *Store) CreateJob(ctx context.Context, j store.Job) (store.Job, bool, error) {
	if j.ID == "" {
		return store.Job{}, false, errors.New("create job: empty id")
	}
	sqlstore.PrepareNew(&j)
	args, err := sqlstore.Args(&j)
	if err != nil {
		return store.Job{}, false, fmt.Errorf("create job: %w", err)
	}
	created := true
	err = s.write(ctx, func(tx *sql.Tx) error {
		if j.IdempotencyKey != "" {
			old, err := scanJob(tx.StmtContext(ctx, s.stmts.txJobByKey).QueryRowContext(ctx, j.IdempotencyKey))
			if err == nil {
				hash := j.RequestHash
				j, created = old, false
				return sqlstore.Replay(old, hash)
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		_, err := tx.StmtContext(ctx, s.stmts.insertJob).ExecContext(ctx, args...)
		return err
	})
	if isConstraint(err, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY) {
		err = fmt.Errorf("job %s exists: %w", j.ID, store.ErrConflict)
	}
	if err != nil {
		return store.Job{}, false, fmt.Errorf("create job: %w", err)
	}
	return j, created, nil
}

func isConstraint(err error, code int) bool {
	var e *sqlitedrv.Error
	return errors.As(err, &e) && e.Code() == code
}

// GetJob returns the job with id, or ErrNotFound.
func (s *Store) GetJob(ctx context.Context, id string) (store.Job, error) {
	j, err := scanJob(s.stmts.getJob.QueryRowContext(ctx, id))
	if err != nil {
		return store.Job{}, fmt.Errorf("get job %s: %w", id, notFound(err))
	}
	return j, nil
}

// notFound turns sql.ErrNoRows into store.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

// UpdateJob loads the job, applies fn and saves the result in one
// transaction. Changes fn makes to ID, CreatedAt, IdempotencyKey,
// RequestHash and Task are ignored; UpdatedAt is set to now. fn runs while
// the database's write lock is held: it must be quick and must not write
// through the store itself.
func (s *Store) UpdateJob(ctx context.Context, id string, fn func(*store.Job) error) (store.Job, error) {
	j, _, err := s.UpdateJobLogged(ctx, id, func(j *store.Job) ([]store.Entry, error) { return nil, fn(j) })
	return j, err
}

// UpdateJobLogged is UpdateJob that appends the entries fn returns to the
// job's log in the same transaction, each payload valid JSON or empty.
func (s *Store) UpdateJobLogged(ctx context.Context, id string, fn func(*store.Job) ([]store.Entry, error)) (store.Job, []store.Event, error) {
	var out store.Job
	var evs []store.Event
	err := s.write(ctx, func(tx *sql.Tx) error {
		j, err := s.load(ctx, tx, id)
		if err != nil {
			return err
		}
		next := j
		entries, err := fn(&next)
		if err != nil {
			return userError{err}
		}
		out = sqlstore.Updated(j, next)
		if err := s.save(ctx, tx, &out); err != nil {
			return err
		}
		evs, err = s.appendAll(ctx, tx, id, entries)
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

// load reads a job inside a write transaction.
func (s *Store) load(ctx context.Context, tx *sql.Tx, id string) (store.Job, error) {
	j, err := scanJob(tx.StmtContext(ctx, s.stmts.txGetJob).QueryRowContext(ctx, id))
	return j, notFound(err)
}

// save writes every mutable column of j.
func (s *Store) save(ctx context.Context, tx *sql.Tx, j *store.Job) error {
	sqlstore.Normalize(j)
	args, err := sqlstore.UpdateArgs(j)
	if err != nil {
		return err
	}
	_, err = tx.StmtContext(ctx, s.stmts.updateJob).ExecContext(ctx, args...)
	return err
}

// CountByStatus counts jobs in each of the five statuses, zeros included.
func (s *Store) CountByStatus(ctx context.Context) (map[store.Status]int, error) {
	counts := map[store.Status]int{
		store.StatusPending: 0, store.StatusRunning: 0,
		store.StatusComplete: 0, store.StatusError: 0, store.StatusCanceled: 0,
	}
	rows, err := s.r.QueryContext(ctx, "SELECT status, COUNT(*) FROM jobs GROUP BY status")
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count jobs: %w", err)
		}
		counts[store.Status(st)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	return counts, nil
}
