package postgres

import (
	"fmt"
	"strings"

	"github.com/agentbox/agentbox/internal/store/sqlstore"
)

// The jobs table's statements, over sqlstore's columns.
var (
	jobColumns   = strings.Join(sqlstore.Columns, ", ")
	selectJob    = "SELECT " + jobColumns + " FROM jobs"
	getJobSQL    = selectJob + " WHERE id = $1"
	lockJobSQL   = getJobSQL + " FOR UPDATE"
	jobByKeySQL  = selectJob + " WHERE idempotency_key = $1 AND idempotency_key <> ''"
	insertJobSQL = "INSERT INTO jobs (" + jobColumns + ") VALUES (" + placeholders(1, len(sqlstore.Columns)) +
		") ON CONFLICT DO NOTHING"
	updateJobSQL = updateSQL()
	// claimSQL locks the oldest pending job no other claimer holds.
	claimSQL = selectJob + " WHERE status = 'pending' ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED"
	// claimWaitSQL waits for the oldest pending job's lock: when every
	// pending job is locked, claimSQL finds none, though the lock may be a
	// moment's (an event appended to the job, which its row counts), and
	// the note that woke the claimer will not come again. Re-checked after
	// the wait, the row no longer matches if another claimer took it.
	claimWaitSQL = selectJob + " WHERE status = 'pending' ORDER BY created_at, id LIMIT 1 FOR UPDATE"
	// claimWaitLimit bounds that wait.
	claimWaitLimit = "SET LOCAL lock_timeout = '2s'"
	// expiredSQL locks the running jobs whose lease ended or whose owner is
	// reclaimed, in id order so concurrent requeuers cannot deadlock.
	expiredSQL = selectJob + ` WHERE status = 'running' AND (lease_until < $1 OR ($2 <> '' AND lease_owner = $2))
ORDER BY id FOR UPDATE`
	// endedBeforeSQL reads the partial index jobs_ended_undeleted in order.
	endedBeforeSQL = selectJob + ` WHERE deleted_at = 0 AND ended_at <> 0 AND ended_at < $1
AND status IN ('complete', 'error', 'canceled') ORDER BY ended_at, id LIMIT $2`
)

const (
	jobExistsSQL = "SELECT 1 FROM jobs WHERE id = $1"
	eventsSQL    = "SELECT seq, time, type, payload FROM events WHERE job_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
	lastSeqSQL   = "SELECT last_seq FROM jobs WHERE id = $1"
	// appendEventSQL takes the job's next seq and inserts the event in one
	// statement: appenders of one job queue on its row lock. No row comes
	// back when the job does not exist.
	appendEventSQL = `WITH next AS (UPDATE jobs SET last_seq = last_seq + 1 WHERE id = $1 RETURNING last_seq)
INSERT INTO events (job_id, seq, time, type, payload) SELECT $1, last_seq, $2, $3, $4 FROM next RETURNING seq`
)

// placeholders is "$from, …, $(from+n-1)".
func placeholders(from, n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = fmt.Sprintf("$%d", from+i)
	}
	return strings.Join(ps, ", ")
}

// updateSQL sets every mutable column, the job's ID the last argument.
func updateSQL() string {
	mutable := sqlstore.Columns[sqlstore.Immutable:]
	sets := make([]string, len(mutable))
	for i, c := range mutable {
		sets[i] = fmt.Sprintf("%s = $%d", c, i+1)
	}
	return fmt.Sprintf("UPDATE jobs SET %s WHERE id = $%d", strings.Join(sets, ", "), len(mutable)+1)
}
