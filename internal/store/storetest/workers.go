package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

// testQueuePosition: pending jobs count from 1 in claim order (oldest
// first, ties by ID); a claimed job leaves the queue and moves the rest up.
func testQueuePosition(t *testing.T, h *harness) {
	s := h.fresh(t)
	b := base()
	for i := range 4 {
		create(t, s, newJob(jobID(i), b.Add(time.Duration(i/2)*time.Millisecond)))
	}
	pos := func(id string) int {
		t.Helper()
		n, err := s.QueuePosition(t.Context(), id)
		if err != nil {
			t.Fatalf("QueuePosition(%s): %v", id, err)
		}
		return n
	}
	for i := range 4 {
		if got := pos(jobID(i)); got != i+1 {
			t.Errorf("position of %s = %d, want %d", jobID(i), got, i+1)
		}
	}
	if _, err := s.ClaimJob(t.Context(), "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	if got, want := pos(jobID(0)), 0; got != want {
		t.Errorf("a claimed job's position = %d, want 0", got)
	}
	if got := pos(jobID(3)); got != 3 {
		t.Errorf("after a claim, the last job's position = %d, want 3", got)
	}
	if _, err := s.QueuePosition(t.Context(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("QueuePosition(unknown) = %v, want ErrNotFound", err)
	}
}

// testWorkers: workers register, heartbeat (fields replaced), list by ID
// and are removed; times round-trip.
func testWorkers(t *testing.T, h *harness) {
	s := h.fresh(t)
	ctx := t.Context()
	if ws, err := s.Workers(ctx); err != nil || len(ws) != 0 {
		t.Fatalf("Workers of a new store = %v, %v", ws, err)
	}
	start := base()
	b := store.Worker{ID: "w-b", Address: "10.0.0.2:8081", Capacity: 4, StartedAt: start, HeartbeatAt: start}
	a := store.Worker{ID: "w-a", Capacity: 2}
	for _, w := range []store.Worker{b, a} {
		if err := s.PutWorker(ctx, w); err != nil {
			t.Fatalf("PutWorker(%s): %v", w.ID, err)
		}
	}
	b.Running, b.HeartbeatAt = 3, start.Add(time.Second)
	if err := s.PutWorker(ctx, b); err != nil {
		t.Fatal(err)
	}
	ws, err := s.Workers(ctx)
	if err != nil || len(ws) != 2 || ws[0].ID != "w-a" || ws[1].ID != "w-b" {
		t.Fatalf("Workers = %+v, %v; want w-a, w-b", ws, err)
	}
	if ws[0].StartedAt.IsZero() || ws[0].HeartbeatAt.IsZero() {
		t.Errorf("zero times were not stored as now: %+v", ws[0])
	}
	got := ws[1]
	if got.Address != b.Address || got.Capacity != 4 || got.Running != 3 || !got.StartedAt.Equal(start) || !got.HeartbeatAt.Equal(b.HeartbeatAt) {
		t.Errorf("w-b = %+v, want %+v", got, b)
	}
	if err := s.RemoveWorker(ctx, "w-a"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveWorker(ctx, "w-a"); err != nil {
		t.Errorf("removing a removed worker: %v", err)
	}
	if ws, _ := s.Workers(ctx); len(ws) != 1 || ws[0].ID != "w-b" {
		t.Errorf("after removing w-a: %+v", ws)
	}
}
