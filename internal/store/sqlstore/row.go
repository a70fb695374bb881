// Package sqlstore is what the SQL stores (sqlite/, postgres/) share: the
// jobs table's columns and how a store.Job maps onto them (times as unix
// nanoseconds, JSON as text, empty for none), the rules of a new job, of a
// replayed idempotency key and of an expired lease, and the list cursor.
// Each store writes its own SQL around them; both keep the same semantics.
package sqlstore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

// Columns lists the jobs table in the order of Args and Scan. The first
// Immutable never change after CreateJob.
var Columns = []string{
	"id", "created_at", "idempotency_key", "request_hash", "task",
	"model", "limit_timeout_ns", "limit_max_steps", "limit_memory_bytes", "limit_nano_cpus",
	"metadata", "status", "attempts", "max_attempts", "steps",
	"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd",
	"error", "result", "context_tokens", "cancel_requested", "lease_owner",
	"lease_until", "sandbox", "updated_at", "started_at", "ended_at",
	"limit_context_window", "deleted_at", "limit_disk_bytes", "image", "workspace_from",
	"repo", "git", "turn", "isolation", "network",
	"limit_egress_bytes",
}

// Immutable is how many of Columns never change after CreateJob.
const Immutable = 5

// Args returns j's column values in Columns order.
func Args(j *store.Job) ([]any, error) {
	meta, err := encodeJSON(j.Metadata, len(j.Metadata) == 0)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
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
	if len(j.Network) > 0 && !json.Valid(j.Network) {
		return nil, fmt.Errorf("network policy is not valid JSON")
	}
	l, u := j.Limits, j.Usage
	return []any{
		j.ID, Nanos(j.CreatedAt), j.IdempotencyKey, j.RequestHash, j.Task,
		j.Model, int64(l.Timeout), int64(l.MaxSteps), l.MemoryBytes, l.NanoCPUs,
		meta, string(j.Status), int64(j.Attempts), int64(j.MaxAttempts), int64(j.Steps),
		u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.CostUSD,
		j.Error, j.Result, j.ContextTokens, j.CancelRequested, j.LeaseOwner,
		Nanos(j.LeaseUntil), string(j.Sandbox), Nanos(j.UpdatedAt), Nanos(j.StartedAt), Nanos(j.EndedAt),
		int64(l.ContextWindow), Nanos(j.DeletedAt), l.DiskBytes, j.Image, j.WorkspaceFrom,
		repo, git, int64(max(j.Turn, 1)), j.Isolation, string(j.Network),
		l.EgressBytes,
	}, nil
}

// UpdateArgs returns the mutable columns' values of j followed by its ID:
// the arguments of an UPDATE setting Columns[Immutable:] WHERE id = the last.
func UpdateArgs(j *store.Job) ([]any, error) {
	args, err := Args(j)
	if err != nil {
		return nil, err
	}
	return append(args[Immutable:], j.ID), nil
}

// Scanner is a row of either driver (*sql.Row, *sql.Rows, pgx.Row).
type Scanner interface{ Scan(dest ...any) error }

// Scan reads one row of Columns.
func Scan(sc Scanner) (store.Job, error) {
	var (
		j                                     store.Job
		created, leaseUntil, updated, started int64
		ended, timeout, maxSteps, att, maxAtt int64
		steps, window, deleted, turn          int64
		meta, status, sandbox, repo, git      string
		network                               string
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
		&repo, &git, &turn, &j.Isolation, &network,
		&l.EgressBytes,
	)
	if err != nil {
		return j, err
	}
	l.Timeout, l.MaxSteps, l.ContextWindow = time.Duration(timeout), int(maxSteps), int(window)
	j.Status, j.Attempts, j.MaxAttempts, j.Steps = store.Status(status), int(att), int(maxAtt), int(steps)
	j.CreatedAt, j.UpdatedAt = FromNanos(created), FromNanos(updated)
	j.StartedAt, j.EndedAt, j.LeaseUntil = FromNanos(started), FromNanos(ended), FromNanos(leaseUntil)
	j.DeletedAt, j.Turn = FromNanos(deleted), int(turn)
	if sandbox != "" {
		j.Sandbox = json.RawMessage(sandbox)
	}
	if network != "" {
		j.Network = json.RawMessage(network)
	}
	if err := decodeJSON(meta, &j.Metadata); err != nil {
		return j, fmt.Errorf("job %s: metadata: %w", j.ID, err)
	}
	if repo != "" {
		j.Repo = new(store.Repo)
		if err := decodeJSON(repo, j.Repo); err != nil {
			return j, fmt.Errorf("job %s: repo: %w", j.ID, err)
		}
	}
	if err := decodeJSON(git, &j.Git); err != nil {
		return j, fmt.Errorf("job %s: git: %w", j.ID, err)
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

// decodeJSON decodes s into v, leaving v as it is when s is "".
func decodeJSON(s string, v any) error {
	if s == "" {
		return nil
	}
	return json.Unmarshal([]byte(s), v)
}

// Nanos is t as stored: unix nanoseconds, 0 for the zero time.
func Nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// FromNanos is the inverse of Nanos, in UTC.
func FromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// Now is the stores' clock, as it will read back from the database.
func Now() time.Time { return FromNanos(time.Now().UnixNano()) }

// Normalize makes j's times and empty values read exactly as they will
// from the database.
func Normalize(j *store.Job) {
	for _, t := range []*time.Time{&j.CreatedAt, &j.UpdatedAt, &j.StartedAt, &j.EndedAt, &j.LeaseUntil, &j.DeletedAt} {
		*t = FromNanos(Nanos(*t))
	}
	if len(j.Metadata) == 0 {
		j.Metadata = nil
	}
	if len(j.Sandbox) == 0 {
		j.Sandbox = nil
	}
	if len(j.Network) == 0 {
		j.Network = nil
	}
	j.Turn = max(j.Turn, 1)
}

// Wrap is nil for a nil err, else err prefixed with what was being done.
func Wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
