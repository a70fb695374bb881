package storetest

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

// fullJob has every field set to a value other than its zero.
func fullJob(id string, b time.Time) store.Job {
	return store.Job{
		ID: id, Task: "write a haiku\nabout ünïcode ✓", Model: "claude-x",
		Limits:   store.Limits{Timeout: 90 * time.Second, MaxSteps: 40, MemoryBytes: 1 << 30, NanoCPUs: 1.5e9, ContextWindow: 16000, DiskBytes: 5 << 30, EgressBytes: 3 << 30},
		Metadata: map[string]string{"team": "infra", "ticket": "A-1", "empty": ""},
		Status:   store.StatusRunning, Attempts: 2, MaxAttempts: 5, Steps: 17,
		Usage: store.Usage{InputTokens: 1e6, OutputTokens: 2e5, CacheReadTokens: 3, CacheWriteTokens: 4, CostUSD: 1.2345},
		Error: "boom", Result: "done", ContextTokens: 123456,
		IdempotencyKey: "key-" + id, RequestHash: "hash-" + id, CancelRequested: true,
		LeaseOwner: "worker-1", LeaseUntil: b.Add(time.Minute + 123*time.Microsecond),
		Sandbox:   json.RawMessage(`{"driver":"docker","id":"c0ffee","n":[1,2]}`),
		CreatedAt: b, UpdatedAt: b.Add(time.Second), StartedAt: b.Add(2 * time.Second), EndedAt: b.Add(3 * time.Second),
		DeletedAt: b.Add(4*time.Second + 567*time.Microsecond),
		Image:     "agentbox-python:3.12", WorkspaceFrom: "job-before", Isolation: "gvisor",
		Network: json.RawMessage(`{"mode":"allow","allow":["pypi.org","*.example.org:8443"],"presets":["python"]}`),
		Repo: &store.Repo{URL: "ssh://git@example.com/o/r.git", Ref: "main", Branch: "agentbox/" + id, Push: true,
			PullRequest: &store.PullRequest{Title: "Fix ✓", Body: "body\nlines", Draft: true}},
		Git: store.Git{BaseCommit: "b0", Branch: "agentbox/" + id, Commit: "c1", Pushed: true,
			PullRequestURL: "https://example.com/o/r/pull/1", Error: "push: denied"},
		Turn: 3,
	}
}

func testCreateGet(t *testing.T, h *harness) {
	s := h.fresh(t)
	b := base()
	for _, want := range []store.Job{fullJob("full", b), newJob("minimal", b)} {
		got := create(t, s, want)
		sameJob(t, "CreateJob "+want.ID, got, want)
		sameJob(t, "GetJob "+want.ID, get(t, s, want.ID), want)
	}
}

func testUpdateRoundTrip(t *testing.T, h *harness) {
	s := h.fresh(t)
	b := base()
	orig := create(t, s, newJob("job", b))
	want := fullJob("job", b.Add(time.Hour))
	got, err := s.UpdateJob(t.Context(), "job", func(j *store.Job) error {
		keep := *j
		*j = want
		j.ID, j.CreatedAt, j.IdempotencyKey, j.RequestHash, j.Task =
			keep.ID, keep.CreatedAt, keep.IdempotencyKey, keep.RequestHash, keep.Task
		return nil
	})
	if err != nil {
		t.Fatalf("UpdateJob: %v", err)
	}
	want.CreatedAt, want.IdempotencyKey, want.RequestHash, want.Task =
		orig.CreatedAt, "", "", orig.Task
	want.UpdatedAt = got.UpdatedAt // the store may stamp it
	sameJob(t, "UpdateJob", got, want)
	sameJob(t, "GetJob", get(t, s, "job"), want)
}

func testNotFound(t *testing.T, h *harness) {
	s := h.fresh(t)
	ctx := t.Context()
	_, err := s.GetJob(ctx, "nope")
	wantErr(t, "GetJob", err, store.ErrNotFound)
	_, err = s.UpdateJob(ctx, "nope", func(*store.Job) error { return nil })
	wantErr(t, "UpdateJob", err, store.ErrNotFound)
	_, err = s.Heartbeat(ctx, "nope", "w", time.Minute)
	wantErr(t, "Heartbeat", err, store.ErrNotFound)
	wantErr(t, "Release", s.Release(ctx, "nope", "w"), store.ErrNotFound)
	_, err = s.AppendEvent(ctx, "nope", "log", json.RawMessage(`{}`))
	wantErr(t, "AppendEvent", err, store.ErrNotFound)
	_, err = s.Events(ctx, "nope", 0, 10)
	wantErr(t, "Events", err, store.ErrNotFound)
}

func testIdempotency(t *testing.T, h *harness) {
	s := h.fresh(t)
	b := base()
	first := newJob("first", b)
	first.IdempotencyKey, first.RequestHash = "k", "h1"
	create(t, s, first)
	tests := []struct {
		name, id, key, hash string
		wantID              string
		wantCreated         bool
		wantErr             error
	}{
		{"same key and request", "second", "k", "h1", "first", false, nil},
		{"same key other request", "third", "k", "h2", "", false, store.ErrConflict},
		{"other key", "fourth", "k2", "h1", "fourth", true, nil},
		{"no key", "fifth", "", "h1", "fifth", true, nil},
		{"no key again", "sixth", "", "h1", "sixth", true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := newJob(tc.id, b.Add(time.Second))
			j.IdempotencyKey, j.RequestHash = tc.key, tc.hash
			got, created, err := s.CreateJob(t.Context(), j)
			if !errors.Is(err, tc.wantErr) || created != tc.wantCreated {
				t.Fatalf("CreateJob = created %v, %v; want %v, %v", created, err, tc.wantCreated, tc.wantErr)
			}
			if err == nil && got.ID != tc.wantID {
				t.Errorf("CreateJob returned job %s, want %s", got.ID, tc.wantID)
			}
		})
	}
	if _, err := s.GetJob(t.Context(), "second"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a replayed create stored a job: %v", err)
	}
}

func testIdempotencyConcurrent(t *testing.T, h *harness) {
	s := h.fresh(t)
	b := base()
	ids := make([]string, 20)
	var created atomic.Int32
	parallel(20, func(i int) {
		j := newJob(jobID(i), b)
		j.IdempotencyKey, j.RequestHash = "same", "hash"
		got, c, err := s.CreateJob(t.Context(), j)
		if err != nil {
			t.Errorf("CreateJob %d: %v", i, err)
			return
		}
		ids[i] = got.ID
		if c {
			created.Add(1)
		}
	})
	if n := created.Load(); n != 1 {
		t.Errorf("%d creates reported created, want 1", n)
	}
	if slices.Sort(ids); len(slices.Compact(ids)) != 1 {
		t.Errorf("creates returned several jobs: %v", ids)
	}
	page, err := s.ListJobs(t.Context(), store.ListOptions{})
	if err != nil || len(page.Jobs) != 1 {
		t.Errorf("ListJobs = %d jobs, %v; want 1", len(page.Jobs), err)
	}
}

func testUpdateConcurrent(t *testing.T, h *harness) {
	s := h.fresh(t)
	create(t, s, newJob("job", base()))
	parallel(100, func(int) {
		_, err := s.UpdateJob(t.Context(), "job", func(j *store.Job) error {
			j.Steps++
			return nil
		})
		if err != nil {
			t.Errorf("UpdateJob: %v", err)
		}
	})
	if got := get(t, s, "job").Steps; got != 100 {
		t.Errorf("Steps = %d after 100 concurrent increments", got)
	}
}

func testUpdateAbort(t *testing.T, h *harness) {
	s := h.fresh(t)
	want := create(t, s, newJob("job", base()))
	errStop := errors.New("stop")
	_, err := s.UpdateJob(t.Context(), "job", func(j *store.Job) error {
		j.Steps, j.Status, j.Error = 9, store.StatusError, "should not be saved"
		return errStop
	})
	wantErr(t, "UpdateJob", err, errStop)
	sameJob(t, "after an aborted update", get(t, s, "job"), want)
}

func testCountByStatus(t *testing.T, h *harness) {
	s := h.fresh(t)
	counts, err := s.CountByStatus(t.Context())
	if err != nil {
		t.Fatalf("CountByStatus: %v", err)
	}
	want := map[store.Status]int{"pending": 0, "running": 0, "complete": 0, "error": 0, "canceled": 0}
	if !maps.Equal(counts, want) {
		t.Errorf("empty store: CountByStatus = %v, want %v", counts, want)
	}
	b := base()
	for i, st := range []store.Status{"pending", "pending", "running", "complete", "canceled", "pending"} {
		j := newJob(jobID(i), b)
		j.Status = st
		create(t, s, j)
		want[st]++
	}
	if counts, err = s.CountByStatus(t.Context()); err != nil || !maps.Equal(counts, want) {
		t.Errorf("CountByStatus = %v, %v; want %v", counts, err, want)
	}
}
