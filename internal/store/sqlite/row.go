package sqlite

import (
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlstore"
)

// The jobs table's columns and codec are sqlstore's, shared with postgres/.
var (
	jobColumns   = sqlstore.Columns
	selectJob    = "SELECT " + strings.Join(jobColumns, ", ") + " FROM jobs"
	insertJobSQL = "INSERT INTO jobs (" + strings.Join(jobColumns, ", ") + ") VALUES (" +
		strings.Repeat("?, ", len(jobColumns)-1) + "?)"
	updateJobSQL = "UPDATE jobs SET " + strings.Join(jobColumns[sqlstore.Immutable:], " = ?, ") +
		" = ? WHERE id = ?"
)

// scanJob reads one row of selectJob.
func scanJob(sc sqlstore.Scanner) (store.Job, error) { return sqlstore.Scan(sc) }

// nanos is t as stored: unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 { return sqlstore.Nanos(t) }

// fromNanos is the inverse of nanos, in UTC.
func fromNanos(n int64) time.Time { return sqlstore.FromNanos(n) }
