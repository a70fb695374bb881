package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlstore"
)

// ListJobs returns jobs newest first (created_at, then id, descending). The
// cursor is the sort key of the last job returned, so paging is exact even
// while jobs are added.
func (s *Store) ListJobs(ctx context.Context, opts store.ListOptions) (store.JobPage, error) {
	q, args, limit, err := listQuery(opts)
	if err != nil {
		return store.JobPage{}, fmt.Errorf("list jobs: %w", err)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return store.JobPage{}, fmt.Errorf("list jobs: %w", dbErr(err))
	}
	var page store.JobPage
	if page.Jobs, err = collectJobs(rows); err != nil {
		return store.JobPage{}, fmt.Errorf("list jobs: %w", dbErr(err))
	}
	if len(page.Jobs) > limit {
		page.Jobs = page.Jobs[:limit]
		page.NextCursor = sqlstore.EncodeCursor(page.Jobs[limit-1])
	}
	return page, nil
}

// asciiLower folds only ASCII letters, as SQLite's LIKE does: PostgreSQL's
// lower() and ILIKE would also fold other letters, by the collation.
const asciiLower = "translate(task, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')"

// listQuery builds ListJobs's query; it asks for one row more than the
// page so it knows whether there is a next page.
func listQuery(opts store.ListOptions) (string, []any, int, error) {
	limit := sqlstore.ListLimit(opts)
	var where []string
	var args []any
	arg := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "$?", fmt.Sprintf("$%d", len(args))))
	}
	if opts.Status != "" {
		arg("status = $?", string(opts.Status))
	}
	if opts.Query != "" {
		arg(asciiLower+` LIKE $? ESCAPE '\'`, sqlstore.LikePattern(asciiToLower(opts.Query)))
	}
	if opts.Cursor != "" {
		created, id, err := sqlstore.DecodeCursor(opts.Cursor)
		if err != nil {
			return "", nil, 0, err
		}
		args = append(args, created, id)
		where = append(where, fmt.Sprintf("(created_at, id) < ($%d, $%d)", len(args)-1, len(args)))
	}
	q := selectJob
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += fmt.Sprintf(" ORDER BY created_at DESC, id DESC LIMIT $%d", len(args)+1)
	return q, append(args, limit+1), limit, nil
}

// asciiToLower lowers the ASCII letters of s only.
func asciiToLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// EndedBefore returns up to limit (at most MaxListLimit) ended jobs whose
// EndedAt is before t and whose data is not deleted, oldest first.
func (s *Store) EndedBefore(ctx context.Context, t time.Time, limit int) ([]store.Job, error) {
	if limit <= 0 {
		limit = sqlstore.DefaultListLimit
	}
	rows, err := s.pool.Query(ctx, endedBeforeSQL, sqlstore.Nanos(t), min(limit, sqlstore.MaxListLimit))
	if err != nil {
		return nil, fmt.Errorf("jobs ended before %v: %w", t, err)
	}
	jobs, err := collectJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("jobs ended before %v: %w", t, err)
	}
	return jobs, nil
}
