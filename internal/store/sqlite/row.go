package sqlite

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

// jobColumns lists the jobs table in the order of jobArgs and scanJob. The
// first immutableColumns never change after CreateJob.
var jobColumns = []string{
	"id", "created_at", "idempotency_key", "request_hash", "task",
	"model", "limit_timeout_ns", "limit_max_steps", "limit_memory_bytes", "limit_nano_cpus",
	"metadata", "status", "attempts", "max_attempts", "steps",
	"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd",
	"error", "result", "context_tokens", "cancel_requested", "lease_owner",
	"lease_until", "sandbox", "updated_at", "started_at", "ended_at",
	"limit_context_window", "deleted_at", "limit_disk_bytes", "image", "workspace_from",
	"repo", "git", "turn",
}

const immutableColumns = 5

var (
	selectJob    = "SELECT " + strings.Join(jobColumns, ", ") + " FROM jobs"
	insertJobSQL = "INSERT INTO jobs (" + strings.Join(jobColumns, ", ") + ") VALUES (" +
		strings.Repeat("?, ", len(jobColumns)-1) + "?)"
	updateJobSQL = "UPDATE jobs SET " + strings.Join(jobColumns[immutableColumns:], " = ?, ") +
		" = ? WHERE id = ?"
)

// jobArgs returns j's column values in jobColumns order.
func jobArgs(j *store.Job) ([]any, error) {
	meta, err := encodeMetadata(j.Metadata)
	if err != nil {
		return nil, err
	}
	repo, err := encodeJSON(j.Repo, j.Repo == nil)
	if err != nil {
		return nil, fmt.Errorf("repo: %w", err)
	}
	git, err := encodeJSON(j.Git, j.Git == store.Git{})
	if err != nil {
		return nil, fmt.Errorf("git: %w", err)
	}
	if len(j.Sandbox) > 0 && !json.Valid(j.Sandbox) {
		return nil, fmt.Errorf("sandbox handle is not valid JSON")
	}
	l, u := j.Limits, j.Usage
	return []any{
		j.ID, nanos(j.CreatedAt), j.IdempotencyKey, j.RequestHash, j.Task,
		j.Model, int64(l.Timeout), int64(l.MaxSteps), l.MemoryBytes, l.NanoCPUs,
		meta, string(j.Status), int64(j.Attempts), int64(j.MaxAttempts), int64(j.Steps),
		u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.CostUSD,
		j.Error, j.Result, j.ContextTokens, j.CancelRequested, j.LeaseOwner,
		nanos(j.LeaseUntil), string(j.Sandbox), nanos(j.UpdatedAt), nanos(j.StartedAt), nanos(j.EndedAt),
		int64(l.ContextWindow), nanos(j.DeletedAt), l.DiskBytes, j.Image, j.WorkspaceFrom,
		repo, git, int64(max(j.Turn, 1)),
	}, nil
}

// updateArgs returns the arguments of updateJob for j.
func updateArgs(j *store.Job) ([]any, error) {
	args, err := jobArgs(j)
	if err != nil {
		return nil, err
	}
	return append(args[immutableColumns:], j.ID), nil
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// scanJob reads one row of selectJob.
func scanJob(sc scanner) (store.Job, error) {
	var (
		j                                     store.Job
		created, leaseUntil, updated, started int64
		ended, timeout, maxSteps, att, maxAtt int64
		steps, window, deleted, turn          int64
		meta, status, sandbox, repo, git      string
		l                                     = &j.Limits
		u                                     = &j.Usage
	)
	err := sc.Scan(
		&j.ID, &created, &j.IdempotencyKey, &j.RequestHash, &j.Task,
		&j.Model, &timeout, &maxSteps, &l.MemoryBytes, &l.NanoCPUs,
		&meta, &status, &att, &maxAtt, &steps,
		&u.InputTokens, &u.OutputTokens, &u.CacheReadTokens, &u.CacheWriteTokens, &u.CostUSD,
		&j.Error, &j.Result, &j.ContextTokens, &j.CancelRequested, &j.LeaseOwner,
		&leaseUntil, &sandbox, &updated, &started, &ended,
		&window, &deleted, &l.DiskBytes, &j.Image, &j.WorkspaceFrom,
		&repo, &git, &turn,
	)
	if err != nil {
		return j, err
	}
	l.Timeout, l.MaxSteps, l.ContextWindow = time.Duration(timeout), int(maxSteps), int(window)
	j.Status, j.Attempts, j.MaxAttempts, j.Steps = store.Status(status), int(att), int(maxAtt), int(steps)
	j.CreatedAt, j.UpdatedAt = fromNanos(created), fromNanos(updated)
	j.StartedAt, j.EndedAt, j.LeaseUntil = fromNanos(started), fromNanos(ended), fromNanos(leaseUntil)
	j.DeletedAt, j.Turn = fromNanos(deleted), int(turn)
	if sandbox != "" {
		j.Sandbox = json.RawMessage(sandbox)
	}
	if j.Metadata, err = decodeMetadata(meta); err != nil {
		return j, fmt.Errorf("job %s: %w", j.ID, err)
	}
	if repo != "" {
		j.Repo = new(store.Repo)
		if err := json.Unmarshal([]byte(repo), j.Repo); err != nil {
			return j, fmt.Errorf("job %s: repo: %w", j.ID, err)
		}
	}
	if git != "" {
		if err := json.Unmarshal([]byte(git), &j.Git); err != nil {
			return j, fmt.Errorf("job %s: git: %w", j.ID, err)
		}
	}
	return j, nil
}

// encodeJSON is v as JSON, or "" when empty.
func encodeJSON(v any, empty bool) (string, error) {
	if empty {
		return "", nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

func encodeMetadata(m map[string]string) (string, error) {
	if len(m) == 0 {
		return "", nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("metadata: %w", err)
	}
	return string(b), nil
}

func decodeMetadata(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	return m, nil
}

// nanos is t as stored: unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromNanos is the inverse of nanos, in UTC.
func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// normalize makes j's times read exactly as they will from the database.
func normalize(j *store.Job) {
	for _, t := range []*time.Time{&j.CreatedAt, &j.UpdatedAt, &j.StartedAt, &j.EndedAt, &j.LeaseUntil, &j.DeletedAt} {
		*t = fromNanos(nanos(*t))
	}
	if len(j.Metadata) == 0 {
		j.Metadata = nil
	}
	if len(j.Sandbox) == 0 {
		j.Sandbox = nil
	}
	j.Turn = max(j.Turn, 1)
}
