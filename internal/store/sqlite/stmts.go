package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// stmts are the prepared statements of the hot paths. Those on the writer
// are bound into each transaction with tx.StmtContext, which reuses the
// statement already prepared on the single write connection.
type stmts struct {
	getJob      *sql.Stmt // reader
	events      *sql.Stmt // reader
	jobExists   *sql.Stmt // reader
	txGetJob    *sql.Stmt // writer
	txJobByKey  *sql.Stmt // writer
	insertJob   *sql.Stmt // writer
	updateJob   *sql.Stmt // writer
	appendEvent *sql.Stmt // writer
}

var (
	getJobSQL   = selectJob + " WHERE id = ?"
	jobByKeySQL = selectJob + " WHERE idempotency_key = ? AND idempotency_key != ''"
)

const (
	jobExistsSQL = "SELECT 1 FROM jobs WHERE id = ?"
	eventsSQL    = "SELECT seq, time, type, payload FROM events WHERE job_id = ? AND seq > ? ORDER BY seq LIMIT ?"
	lastSeqSQL   = "SELECT COALESCE(MAX(seq), 0) FROM events WHERE job_id = ?"
	// appendEventSQL allocates the next seq and inserts in one statement;
	// no row comes back when the job does not exist.
	appendEventSQL = `INSERT INTO events (job_id, seq, time, type, payload)
SELECT ?1, COALESCE((SELECT MAX(seq) FROM events WHERE job_id = ?1), 0) + 1, ?2, ?3, ?4
WHERE EXISTS (SELECT 1 FROM jobs WHERE id = ?1)
RETURNING seq`
)

func (st *stmts) prepare(ctx context.Context, w, r *sql.DB) error {
	for _, p := range []struct {
		db  *sql.DB
		dst **sql.Stmt
		sql string
	}{
		{r, &st.getJob, getJobSQL},
		{r, &st.events, eventsSQL},
		{r, &st.jobExists, jobExistsSQL},
		{w, &st.txGetJob, getJobSQL},
		{w, &st.txJobByKey, jobByKeySQL},
		{w, &st.insertJob, insertJobSQL},
		{w, &st.updateJob, updateJobSQL},
		{w, &st.appendEvent, appendEventSQL},
	} {
		stmt, err := p.db.PrepareContext(ctx, p.sql)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		*p.dst = stmt
	}
	return nil
}

func (st *stmts) close() error {
	var errs []error
	for _, s := range []*sql.Stmt{st.getJob, st.events, st.jobExists, st.txGetJob,
		st.txJobByKey, st.insertJob, st.updateJob, st.appendEvent} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}
