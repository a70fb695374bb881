package jobs_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/workspace"
)

// TestReaperRequeuesDeadWorkersJobs: an API replica has a Feed, a Service
// and a Reaper, no Scheduler; a job whose worker died (its lease expired)
// goes back to pending with its reason in the log, and a follower of the
// job on the replica is woken by it.
func TestReaperRequeuesDeadWorkersJobs(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(bg, filepath.Join(dir, "agentbox.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Now().UTC()
	j, _, err := st.CreateJob(bg, store.Job{ID: jobs.NewID(), Task: "t", Turn: 1, MaxAttempts: 3, Status: store.StatusRunning,
		Attempts: 1, LeaseOwner: "dead", LeaseUntil: now.Add(-time.Second), CreatedAt: now, StartedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	feed := jobs.NewFeed(st, nil)
	svc := newService(t, jobs.ServiceConfig{Store: st, Workspaces: workspace.NewLocal(dir), Feed: feed})
	ctx, cancel := context.WithCancel(bg)
	reaped := make(chan struct{})
	go func() {
		defer close(reaped)
		jobs.NewReaper(jobs.ReaperConfig{Feed: feed, Lease: 20 * time.Millisecond}).Run(ctx)
	}()
	defer func() { cancel(); <-reaped }()

	wctx, wcancel := context.WithTimeout(bg, 10*time.Second)
	defer wcancel()
	if err := svc.WaitEvents(wctx, j.ID, 0, time.Hour); err != nil {
		t.Fatalf("follower not woken by the requeue: %v", err)
	}
	evs, err := svc.Events(bg, j.ID, 0, 10)
	if err != nil || len(evs) != 1 {
		t.Fatalf("events %+v, %v; want the requeue's state", evs, err)
	}
	s, ok := event.As[event.State](evs[0].Type, evs[0].Payload)
	if !ok || s.Status != store.StatusPending || s.Reason != "the worker running it stopped (lease expired)" {
		t.Errorf("event %s %s; want pending, lease expired", evs[0].Type, evs[0].Payload)
	}
	if got, _ := svc.Get(bg, j.ID); got.Status != store.StatusPending || got.LeaseOwner != "" {
		t.Errorf("job %s owned by %q; want pending, no owner", got.Status, got.LeaseOwner)
	}
}
