package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/fake"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/workspace"
)

// holdAgent keeps its job running until released, and reports its sandbox.
type holdAgent struct {
	started chan sandbox.Sandbox
	release chan struct{}
}

func (a holdAgent) Run(ctx context.Context, r *jobs.Run) (jobs.Outcome, error) {
	a.started <- r.Sandbox
	select {
	case <-a.release:
	case <-ctx.Done():
	}
	return jobs.Outcome{Status: store.StatusComplete}, nil
}

// TestGuestOfRunningJob: the server running a job hands out its worker's
// own guest client; another server on the same engine (API-only)
// reattaches to the sandbox from the saved handle; neither once it ended.
func TestGuestOfRunningJob(t *testing.T) {
	e := newFakeEnv(t)
	agent := holdAgent{started: make(chan sandbox.Sandbox, 1), release: make(chan struct{})}
	svc, _ := e.start(t, agent)
	apiOnly := newService(t, jobs.ServiceConfig{Store: e.st, Workspaces: workspace.NewLocal(e.dir),
		Scheduler: jobs.NewScheduler(jobs.SchedulerConfig{Store: e.st, WorkerID: "api", Driver: e.driver})})
	if _, err := svc.Guest(bg, "job_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
	id := submit(t, svc, "x", store.Limits{})
	var sb sandbox.Sandbox
	select {
	case sb = <-agent.started:
	case <-time.After(2 * time.Minute):
		t.Fatal("job did not start")
	}
	g, err := svc.Guest(bg, id)
	if err != nil || g != sb.Guest() {
		t.Fatalf("worker's server: %p %v, want the worker's client %p", g, err, sb.Guest())
	}
	waitFor(t, func() bool { j, _ := svc.Get(bg, id); return len(j.Sandbox) > 0 })
	other, err := apiOnly.Guest(bg, id)
	if err != nil {
		t.Fatalf("API-only server: %v", err)
	}
	if _, err := other.Health(bg); err != nil {
		t.Errorf("reattached guest: %v", err)
	}
	if again, _ := apiOnly.Guest(bg, id); again != other {
		t.Error("the reattached client was not kept")
	}
	close(agent.release)
	await(t, svc, id)
	for name, s := range map[string]*jobs.Service{"worker's": svc, "API-only": apiOnly} {
		if _, err := s.Guest(bg, id); !errors.Is(err, jobs.ErrNoSandbox) || !strings.Contains(err.Error(), "complete") {
			t.Errorf("%s server, ended job: %v", name, err)
		}
	}
}

// recordingDriver is the fake driver recording, by name, the sandboxes it
// is asked to recover; a sandbox it recovers must never be destroyed.
type recordingDriver struct {
	*fake.Driver
	mu        sync.Mutex
	names     map[string]string // of the sandboxes, by ID
	recovered []string
}

func (d *recordingDriver) Recover(ctx context.Context, h sandbox.Handle) (sandbox.Sandbox, error) {
	d.mu.Lock()
	d.recovered = append(d.recovered, d.names[h.ID])
	d.mu.Unlock()
	sb, err := d.Driver.Recover(ctx, h)
	if err != nil {
		return nil, err
	}
	return undestroyable{sb}, nil
}

type undestroyable struct{ sandbox.Sandbox }

func (undestroyable) Destroy(context.Context) error { panic("the API must never destroy a sandbox") }

// newRecordingDriver runs the sandboxes named, the last destroyed at once.
func newRecordingDriver(t *testing.T, names ...string) (*recordingDriver, map[string]sandbox.Handle) {
	t.Helper()
	d := &recordingDriver{Driver: newFakeEnv(t).driver.(*fake.Driver), names: map[string]string{}}
	handles := map[string]sandbox.Handle{}
	for i, name := range names {
		sb, err := d.Create(bg, sandbox.Spec{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sb.Destroy(bg) })
		if i == len(names)-1 {
			sb.Destroy(bg)
		}
		handles[name], d.names[sb.Handle().ID] = sb.Handle(), name
	}
	return d, handles
}

// TestGuestStates covers each state of a job on the fake driver: the saved
// handle is reattached to once, again when it changes, and never for a job
// without a running sandbox.
func TestGuestStates(t *testing.T) {
	st, err := sqlite.Open(bg, filepath.Join(t.TempDir(), "a.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d, handles := newRecordingDriver(t, "sb_1", "sb_2", "sb_gone")
	svc := newService(t, jobs.ServiceConfig{Store: st, Workspaces: workspace.NewLocal(t.TempDir()),
		Scheduler: jobs.NewScheduler(jobs.SchedulerConfig{Store: st, WorkerID: "api", Driver: d})})
	id := submit(t, svc, "x", store.Limits{})
	set := func(status store.Status, sandboxID string) {
		t.Helper()
		var h []byte
		if sandboxID != "" {
			h, _ = json.Marshal(handles[sandboxID])
		}
		if _, err := st.UpdateJob(bg, id, func(j *store.Job) error { j.Status, j.Sandbox = status, h; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	wantNone := func(what string) {
		t.Helper()
		if _, err := svc.Guest(bg, id); !errors.Is(err, jobs.ErrNoSandbox) || !strings.Contains(err.Error(), what) {
			t.Errorf("want ErrNoSandbox mentioning %q, got %v", what, err)
		}
	}
	wantNone("pending")
	set(store.StatusRunning, "")
	// A sandbox still starting is waited for: until the caller gives up,
	short, cancel := context.WithTimeout(bg, 300*time.Millisecond)
	begin := time.Now()
	_, err = svc.Guest(short, id)
	cancel()
	if !errors.Is(err, jobs.ErrNoSandbox) || !strings.Contains(err.Error(), "starting") || time.Since(begin) < 300*time.Millisecond {
		t.Errorf("starting, caller gone after 300ms: %v after %v", err, time.Since(begin))
	}
	// or until the worker saves its handle.
	type result struct {
		g   *guest.Client
		err error
	}
	got := make(chan result, 1)
	go func() {
		g, err := svc.Guest(bg, id)
		got <- result{g, err}
	}()
	set(store.StatusRunning, "sb_1")
	r := <-got
	if r.err != nil {
		t.Fatalf("sandbox started while waiting: %v", r.err)
	}
	g1 := r.g
	if g, _ := svc.Guest(bg, id); g != g1 {
		t.Error("second call reattached again")
	}
	set(store.StatusRunning, "sb_2") // a later attempt's sandbox
	if g, err := svc.Guest(bg, id); err != nil || g == g1 {
		t.Errorf("new sandbox: %v, same client %v", err, g == g1)
	}
	set(store.StatusRunning, "sb_gone")
	wantNone("gone")
	set(store.StatusError, "sb_2")
	wantNone("error")
	set(store.StatusRunning, "sb_2")
	if _, err := svc.Guest(bg, id); err != nil {
		t.Fatal(err)
	}
	if want := "sb_1 sb_2 sb_gone sb_2"; strings.Join(d.recovered, " ") != want {
		t.Errorf("recovered %v, want %s (the ended job's client dropped)", d.recovered, want)
	}
	noDriver := newService(t, jobs.ServiceConfig{Store: st, Workspaces: workspace.NewLocal(t.TempDir())})
	if _, err := noDriver.Guest(bg, id); !errors.Is(err, jobs.ErrNoSandbox) {
		t.Errorf("server without a driver: %v", err)
	}
}
