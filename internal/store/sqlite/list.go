package sqlite

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlstore"
)

// Page sizes of ListJobs.
const (
	DefaultListLimit = sqlstore.DefaultListLimit
	MaxListLimit     = sqlstore.MaxListLimit
)

// ErrBadCursor means a ListOptions.Cursor was not made by ListJobs.
var ErrBadCursor = sqlstore.ErrBadCursor

// ListJobs returns jobs newest first (created_at, then id, descending). The
// cursor is the sort key of the last job returned, so paging is exact even
// while jobs are added.
func (s *Store) ListJobs(ctx context.Context, opts store.ListOptions) (store.JobPage, error) {
	q, args, limit, err := listQuery(opts)
	if err != nil {
		return store.JobPage{}, fmt.Errorf("list jobs: %w", err)
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return store.JobPage{}, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var page store.JobPage
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return store.JobPage{}, fmt.Errorf("list jobs: %w", err)
		}
		page.Jobs = append(page.Jobs, j)
	}
	if err := rows.Err(); err != nil {
		return store.JobPage{}, fmt.Errorf("list jobs: %w", err)
	}
	if len(page.Jobs) > limit {
		page.Jobs = page.Jobs[:limit]
		last := page.Jobs[limit-1]
		page.NextCursor = sqlstore.EncodeCursor(last)
	}
	return page, nil
}

// listQuery builds ListJobs's query; it asks for one row more than the
// page so it knows whether there is a next page.
func listQuery(opts store.ListOptions) (string, []any, int, error) {
	limit := sqlstore.ListLimit(opts)
	var where []string
	var args []any
	if opts.Status != "" {
		where, args = append(where, "status = ?"), append(args, string(opts.Status))
	}
	if opts.Query != "" {
		where, args = append(where, `task LIKE ? ESCAPE '\'`), append(args, sqlstore.LikePattern(opts.Query))
	}
	if opts.Cursor != "" {
		created, id, err := sqlstore.DecodeCursor(opts.Cursor)
		if err != nil {
			return "", nil, 0, err
		}
		where, args = append(where, "(created_at, id) < (?, ?)"), append(args, created, id)
	}
	q := selectJob
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created_at DESC, id DESC LIMIT ?"
	return q, append(args, limit+1), limit, nil
}

// endedBeforeSQL reads the partial index jobs_ended_undeleted in order, so
// it visits only the jobs it returns. The unary + keeps the planner off the
// status index (which would read every ended job, then sort).
var endedBeforeSQL = selectJob + ` WHERE deleted_at = 0 AND ended_at != 0 AND ended_at < ?
AND +status IN ('complete', 'error', 'canceled') ORDER BY ended_at, id LIMIT ?`

// EndedBefore returns up to limit (at most MaxListLimit) ended jobs whose
// EndedAt is before t and whose data is not deleted, oldest first.
func (s *Store) EndedBefore(ctx context.Context, t time.Time, limit int) ([]store.Job, error) {
	if limit <= 0 {
		limit = DefaultListLimit
	}
	rows, err := s.r.QueryContext(ctx, endedBeforeSQL, nanos(t), min(limit, MaxListLimit))
	if err != nil {
		return nil, fmt.Errorf("jobs ended before %v: %w", t, err)
	}
	defer rows.Close()
	var out []store.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("jobs ended before %v: %w", t, err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("jobs ended before %v: %w", t, err)
	}
	return out, nil
}
