package jobs_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/workspace"
)

// notingStore is a SQLite store that has notes (store.Notifier), as a
// store several processes share does; the test sends the notes another
// process's writes would have caused.
type notingStore struct {
	store.Store
	notes chan store.Note
}

func (s *notingStore) Subscribe(context.Context) (<-chan store.Note, error) { return s.notes, nil }

// noteWithin is how soon a note must take effect (issue 14).
const noteWithin = 100 * time.Millisecond

// TestNotePendingWakesIdleScheduler: a job another process made pending
// is claimed as soon as its note comes, long before the poll interval.
func TestNotePendingWakesIdleScheduler(t *testing.T) {
	e := newFakeEnv(t)
	ns := &notingStore{Store: e.st, notes: make(chan store.Note, 1)}
	e.st = ns
	svc, _ := e.start(t, jobs.ShellAgent{}, func(c *jobs.SchedulerConfig) { c.Poll = time.Hour })
	// The scheduler claims this one, looks for more, finds none and idles
	// for the hour.
	await(t, svc, submit(t, svc, "true", store.Limits{}))

	j, _, err := e.st.CreateJob(bg, store.Job{ID: jobs.NewID(), Task: "true", Turn: 1, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	noted := time.Now()
	ns.notes <- store.Note{Kind: store.NotePending, JobID: j.ID}
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	if err := svc.WaitEvents(ctx, j.ID, 0, time.Hour); err != nil { // its running event
		t.Fatalf("job not claimed after its note: %v", err)
	}
	if j, err = svc.Get(bg, j.ID); err != nil || j.StartedAt.IsZero() {
		t.Fatalf("job not claimed after its note: %+v %v", j, err)
	}
	took := j.StartedAt.Sub(noted)
	t.Logf("claimed %v after its note", took)
	if took > noteWithin {
		t.Errorf("claimed %v after its note; want at most %v", took, noteWithin)
	}
	await(t, svc, j.ID)
}

// TestNoteEventWakesFollowers: an event another process appended wakes a
// WaitEvents on its job at once, not at its poll.
func TestNoteEventWakesFollowers(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(bg, filepath.Join(dir, "agentbox.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ns := &notingStore{Store: st, notes: make(chan store.Note, 1)}
	feed := jobs.NewFeed(ns, nil)
	svc := newService(t, jobs.ServiceConfig{Store: ns, Workspaces: workspace.NewLocal(dir), Feed: feed})
	ctx, cancel := context.WithCancel(bg)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		feed.Run(ctx)
	}()
	defer func() { cancel(); <-ran }()
	j, _, err := st.CreateJob(bg, store.Job{ID: jobs.NewID(), Task: "true", Turn: 1})
	if err != nil {
		t.Fatal(err)
	}

	woke := make(chan error, 1)
	go func() { woke <- svc.WaitEvents(ctx, j.ID, 0, time.Hour) }()
	// The job's log stays empty: only a note can wake the wait. It is sent
	// until the wait has subscribed and takes one.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case err := <-woke:
			if err != nil {
				t.Fatal(err)
			}
			return
		case <-tick.C:
			select {
			case ns.notes <- store.Note{Kind: store.NoteEvent, JobID: j.ID, Seq: 1}:
			default:
			}
		case <-deadline:
			t.Fatal("WaitEvents not woken by the note of an event")
		}
	}
}
