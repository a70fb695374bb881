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
	e := newEnv(t)
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

// fakeDriver recovers sandboxes whose guest is never called, counting.
type fakeDriver struct {
	mu        sync.Mutex
	recovered []string
}

func (d *fakeDriver) Create(context.Context, sandbox.Spec) (sandbox.Sandbox, error) {
	panic("not used")
}
func (d *fakeDriver) List(context.Context) ([]sandbox.Listed, error) { return nil, nil }
func (d *fakeDriver) Remove(context.Context, sandbox.Handle) error   { return nil }
func (d *fakeDriver) Capabilities() sandbox.Capabilities             { return sandbox.Capabilities{} }
func (d *fakeDriver) Close() error                                   { return nil }
func (d *fakeDriver) Recover(_ context.Context, h sandbox.Handle) (sandbox.Sandbox, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.recovered = append(d.recovered, h.ID)
	if h.ID == "sb_gone" {
		return nil, sandbox.ErrGone
	}
	return fakeSandbox{h: h, g: guest.NewClient("/nonexistent/g.sock")}, nil
}

type fakeSandbox struct {
	h sandbox.Handle
	g *guest.Client
}

func (s fakeSandbox) Handle() sandbox.Handle        { return s.h }
func (s fakeSandbox) Guest() *guest.Client          { return s.g }
func (s fakeSandbox) Destroy(context.Context) error { panic("the API must never destroy a sandbox") }

// TestGuestStates covers each state of a job without Docker: the saved
// handle is reattached to once, again when it changes, and never for a job
// without a running sandbox.
func TestGuestStates(t *testing.T) {
	st, err := sqlite.Open(bg, filepath.Join(t.TempDir(), "a.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d := &fakeDriver{}
	svc := newService(t, jobs.ServiceConfig{Store: st, Workspaces: workspace.NewLocal(t.TempDir()),
		Scheduler: jobs.NewScheduler(jobs.SchedulerConfig{Store: st, WorkerID: "api", Driver: d})})
	id := submit(t, svc, "x", store.Limits{})
	set := func(status store.Status, sandboxID string) {
		t.Helper()
		var h []byte
		if sandboxID != "" {
			h, _ = json.Marshal(sandbox.Handle{ID: sandboxID, Driver: "fake"})
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
