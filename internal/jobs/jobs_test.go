package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/internal/workspace"
)

var guestBinary string

func TestMain(m *testing.M) { testenv.MainWithGuest(m, &guestBinary) }

var bg = context.Background()

// env is a store, a driver and a data dir for one test.
type env struct {
	dir    string
	st     store.Store
	driver sandbox.Driver
	// worker is the scheduler's driver when set (tiers over driver).
	worker sandbox.Driver
}

func newEnv(t *testing.T) *env { return newEnvFrom(t, "") }

// newEnvFrom is newEnv on a copy of the store file fixture ("" for a new
// store).
func newEnvFrom(t *testing.T, fixture string) *env {
	t.Helper()
	testenv.DockerWithImage(t)
	e := newBareEnv(t, fixture)
	d, err := docker.New(docker.Config{Image: testenv.Image(), GuestBinary: guestBinary,
		StateDir: filepath.Join(e.dir, "sandboxes"), Instance: "jobtest-" + filepath.Base(e.dir)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	e.driver = d
	return e
}

// newBareEnv is an env with a store (a copy of fixture, if not "") and no
// driver.
func newBareEnv(t *testing.T, fixture string) *env {
	t.Helper()
	dir, err := os.MkdirTemp("", "abj") // short: sandbox socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if fixture != "" {
		b, err := os.ReadFile(fixture)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "agentbox.db"), b, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	st, err := sqlite.Open(bg, filepath.Join(dir, "agentbox.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &env{dir: dir, st: st}
}

// start runs a scheduler with agent until the test ends.
func (e *env) start(t *testing.T, agent jobs.Agent, mod ...func(*jobs.SchedulerConfig)) (*jobs.Service, context.CancelFunc) {
	t.Helper()
	cfg := jobs.SchedulerConfig{WorkerID: "w1", Concurrency: 2, Workspaces: workspace.NewLocal(e.dir), Poll: 50 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	for _, m := range mod {
		m(&cfg)
	}
	var d sandbox.Driver = e.driver
	if e.worker != nil {
		d = e.worker
	}
	cfg.Store, cfg.Feed, cfg.Driver, cfg.Agent = e.st, jobs.NewFeed(e.st, nil), d, agent
	sched := jobs.NewScheduler(cfg)
	svc := newService(t, jobs.ServiceConfig{Store: e.st, Workspaces: cfg.Workspaces, Feed: cfg.Feed, Scheduler: sched, Repos: cfg.Repos})
	return svc, runScheduler(t, sched, cfg.Feed)
}

// newService is jobs.NewService, failing the test on an error.
func newService(t testing.TB, cfg jobs.ServiceConfig) *jobs.Service {
	t.Helper()
	svc, err := jobs.NewService(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// runScheduler runs sched and its feed until the returned stop is called
// (or the test ends), and stop returns once they have stopped.
func runScheduler(t *testing.T, sched *jobs.Scheduler, feed *jobs.Feed) (stop func()) {
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fed := make(chan struct{})
		go func() {
			defer close(fed)
			feed.Run(ctx)
		}()
		sched.Run(ctx)
		<-fed
	}()
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return stop
}

// await waits for the job to reach a final status, and for its final state
// event, which the worker appends just after recording the status.
func await(t *testing.T, svc *jobs.Service, id string) store.Job {
	t.Helper()
	return awaitAfter(t, svc, id, 0)
}

// awaitAfter is await for the first final state event after seq after
// (the end of a later turn).
func awaitAfter(t *testing.T, svc *jobs.Service, id string, after int64) store.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 2*time.Minute)
	defer cancel()
	for {
		evs, err := svc.Events(ctx, id, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			after = ev.Seq
			var st struct{ Status store.Status }
			if ev.Type == event.TypeState && json.Unmarshal(ev.Payload, &st) == nil && st.Status.Final() {
				j, err := svc.Get(ctx, id) // recorded before its state event
				if err != nil {
					t.Fatal(err)
				}
				return j
			}
		}
		j, err := svc.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.WaitEvents(ctx, id, after, 200*time.Millisecond); err != nil {
			t.Fatalf("job %s did not end: %v (status %s)", id, err, j.Status)
		}
	}
}

func submit(t *testing.T, svc *jobs.Service, task string, lim store.Limits) string {
	t.Helper()
	j, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: task, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	return j.ID
}

func eventsOf(t *testing.T, svc *jobs.Service, id string) []store.Event {
	t.Helper()
	evs, err := svc.Events(bg, id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func (e *env) assertNoSandboxes(t *testing.T) {
	t.Helper()
	hs, err := e.driver.List(bg)
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 0 {
		t.Errorf("sandboxes left: %+v", hs)
	}
}

func TestTaskRunsToCompletion(t *testing.T) {
	e := newFakeEnv(t)
	svc, _ := e.start(t, jobs.ShellAgent{})
	id := submit(t, svc, "echo hello > out.txt; echo to-stdout; echo to-stderr >&2", store.Limits{})
	j := await(t, svc, id)
	if j.Status != store.StatusComplete || j.Attempts != 1 || j.Steps != 1 || j.EndedAt.IsZero() {
		t.Fatalf("job %+v", j)
	}
	ws, err := svc.Workspace(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	root, err := ws.Open(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if b, _ := root.ReadFile("out.txt"); string(b) != "hello\n" {
		t.Errorf("workspace out.txt = %q", b)
	}
	var types, out []string
	for i, ev := range eventsOf(t, svc, id) {
		if ev.Seq != int64(i+1) {
			t.Errorf("event %d has seq %d", i, ev.Seq)
		}
		types = append(types, ev.Type)
		if ev.Type == event.TypeOutput {
			out = append(out, string(ev.Payload))
		}
	}
	want := "state,state,sandbox,command,output,output,exit,state"
	if got := strings.Join(types, ","); got != want && got != strings.Replace(want, "output,output", "output", 1) {
		t.Errorf("event types %s, want %s", got, want)
	}
	if all := strings.Join(out, ""); !strings.Contains(all, "to-stdout") || !strings.Contains(all, "to-stderr") {
		t.Errorf("output events %s", all)
	}
	e.assertNoSandboxes(t)
}

func TestFailingTaskEndsInError(t *testing.T) {
	e := newFakeEnv(t)
	svc, _ := e.start(t, jobs.ShellAgent{})
	j := await(t, svc, submit(t, svc, "echo about to fail; exit 3", store.Limits{}))
	if j.Status != store.StatusError || j.Error != "task script exited 3" {
		t.Errorf("job %s: %q", j.Status, j.Error)
	}
}

func TestCancelStopsRunningJob(t *testing.T) {
	e := newFakeEnv(t)
	svc, _ := e.start(t, jobs.ShellAgent{})
	id := submit(t, svc, "touch started; sleep 300", store.Limits{})
	waitFor(t, func() bool { return e.workspaceHas(id, "started") })
	begin := time.Now()
	if _, err := svc.Cancel(bg, id); err != nil {
		t.Fatal(err)
	}
	j := await(t, svc, id)
	if j.Status != store.StatusCanceled || time.Since(begin) > 20*time.Second {
		t.Errorf("job %s after %v: %q", j.Status, time.Since(begin), j.Error)
	}
	if _, err := svc.Cancel(bg, id); !errors.Is(err, jobs.ErrEnded) {
		t.Errorf("second cancel: %v, want ErrEnded", err)
	}
	e.assertNoSandboxes(t)
}

func TestCancelPendingJob(t *testing.T) {
	e := newFakeEnv(t)
	svc, _ := e.start(t, jobs.ShellAgent{}, func(c *jobs.SchedulerConfig) { c.Concurrency = 0 })
	id := submit(t, svc, "true", store.Limits{})
	j, err := svc.Cancel(bg, id)
	if err != nil || j.Status != store.StatusCanceled {
		t.Fatalf("cancel pending: %+v %v", j, err)
	}
}

func TestTimeout(t *testing.T) {
	e := newFakeEnv(t)
	svc, _ := e.start(t, jobs.ShellAgent{})
	j := await(t, svc, submit(t, svc, "sleep 300", store.Limits{Timeout: 2 * time.Second}))
	if j.Status != store.StatusError || !strings.Contains(j.Error, "timed out after 2s") {
		t.Errorf("job %s: %q", j.Status, j.Error)
	}
	e.assertNoSandboxes(t)
}

// killGuest kills its sandbox's guest, then waits for its job to be stopped:
// the watchdog, not the agent, must notice.
type killGuest struct{}

func (killGuest) Run(ctx context.Context, r *jobs.Run) (jobs.Outcome, error) {
	r.Sandbox.Guest().Exec(ctx, guest.Shell("kill -9 $PPID"))
	<-ctx.Done()
	return jobs.Outcome{}, nil
}

func TestWatchdogEndsJobWhoseSandboxDied(t *testing.T) {
	e := newFakeEnv(t)
	svc, _ := e.start(t, killGuest{}, func(c *jobs.SchedulerConfig) { c.WatchdogInterval = 200 * time.Millisecond })
	j := await(t, svc, submit(t, svc, "anything", store.Limits{}))
	if j.Status != store.StatusError || !strings.Contains(j.Error, "sandbox stopped answering") {
		t.Errorf("job %s: %q", j.Status, j.Error)
	}
	e.assertNoSandboxes(t)
}

// deadJob makes a job that a dead worker claimed (its lease already over).
func (e *env) deadJob(t *testing.T, task string, maxAttempts int) store.Job {
	t.Helper()
	now := time.Now().UTC()
	if _, _, err := e.st.CreateJob(bg, store.Job{ID: jobs.NewID(), Task: task, Status: store.StatusPending,
		MaxAttempts: maxAttempts, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	j, err := e.st.ClaimJob(bg, "dead-worker", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return time.Now().After(j.LeaseUntil) })
	return j
}

func TestRecoveryRequeuesAndReaps(t *testing.T) {
	e := newFakeEnv(t)
	again := e.deadJob(t, "echo recovered > r.txt", 3)
	spent := e.deadJob(t, "true", 1)
	os.MkdirAll(workspaceDir(e.dir, again.ID), 0o755)
	stale, err := sandbox.Start(bg, e.driver, sandbox.Spec{}, sandbox.Binding{JobID: again.ID, WorkspaceDir: workspaceDir(e.dir, again.ID)})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := json.Marshal(stale.Handle())
	e.st.UpdateJob(bg, again.ID, func(x *store.Job) error { x.Sandbox = h; return nil })
	// This worker's orphan: its job does not exist.
	if _, err := sandbox.Start(bg, e.driver, sandbox.Spec{Owner: "w1"}, sandbox.Binding{JobID: "job_ghost"}); err != nil {
		t.Fatal(err)
	}
	// Not this worker's (agentbox exec's, or another server's): never reaped.
	foreign, err := sandbox.Start(bg, e.driver, sandbox.Spec{}, sandbox.Binding{})
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Destroy(bg)

	svc, _ := e.start(t, jobs.ShellAgent{})
	j := await(t, svc, again.ID)
	if j.Status != store.StatusComplete || j.Attempts != 2 {
		t.Errorf("requeued job: %s after %d attempts: %q", j.Status, j.Attempts, j.Error)
	}
	if b, _ := os.ReadFile(filepath.Join(workspaceDir(e.dir, again.ID), "r.txt")); string(b) != "recovered\n" {
		t.Errorf("second attempt's output %q", b)
	}
	j = await(t, svc, spent.ID)
	if j.Status != store.StatusError || !strings.Contains(j.Error, "lease expired after 1 attempts") {
		t.Errorf("job at its last attempt: %s %q", j.Status, j.Error)
	}
	waitFor(t, func() bool { hs, _ := e.driver.List(bg); return len(hs) == 1 })
	if hs, _ := e.driver.List(bg); len(hs) != 1 || hs[0].Handle.ID != foreign.Handle().ID {
		t.Errorf("left %+v, want only the foreign sandbox", hs)
	}
}

func TestPeriodicReapLeavesRunningJobsAlone(t *testing.T) {
	e := newFakeEnv(t)
	svc, _ := e.start(t, jobs.ShellAgent{}, func(c *jobs.SchedulerConfig) { c.ReapInterval = 100 * time.Millisecond })
	j := await(t, svc, submit(t, svc, "sleep 2; echo survived > s.txt", store.Limits{}))
	if j.Status != store.StatusComplete || j.Attempts != 1 {
		t.Errorf("job %s after %d attempts: %q", j.Status, j.Attempts, j.Error)
	}
	running := 0
	for _, ev := range eventsOf(t, svc, j.ID) {
		if ev.Type == event.TypeState && strings.Contains(string(ev.Payload), `"running"`) {
			running++
		}
	}
	if running != 1 {
		t.Errorf("the job was started %d times", running)
	}
}

func TestEngineOutageHandsJobsBack(t *testing.T) {
	e := newFakeEnv(t)
	down, err := docker.New(docker.Config{Host: "unix:///nonexistent/docker.sock", Image: testenv.Image(),
		GuestBinary: guestBinary, StateDir: filepath.Join(e.dir, "sandboxes"), Instance: "down"})
	if err != nil {
		t.Fatal(err)
	}
	e.driver = down
	svc, _ := e.start(t, jobs.ShellAgent{})
	id := submit(t, svc, "true", store.Limits{})
	waitFor(t, func() bool {
		for _, ev := range eventsOf(t, svc, id) {
			if strings.Contains(string(ev.Payload), "engine was unavailable") {
				return true
			}
		}
		return false
	})
	if j, _ := svc.Get(bg, id); j.Status != store.StatusPending && j.Status != store.StatusRunning || j.Attempts > 1 {
		t.Errorf("job after an engine outage: %s, %d attempts; want it back in the queue", j.Status, j.Attempts)
	}
}

// flakyStore fails the first n writes of a final status, like a full disk.
type flakyStore struct {
	store.Store
	n atomic.Int32
}

func (f *flakyStore) UpdateJob(ctx context.Context, id string, fn func(*store.Job) error) (store.Job, error) {
	return f.Store.UpdateJob(ctx, id, func(j *store.Job) error {
		if err := fn(j); err != nil {
			return err
		}
		if j.Status.Final() && f.n.Add(-1) >= 0 {
			return errors.New("disk full")
		}
		return nil
	})
}

func TestFinalWriteIsRetried(t *testing.T) {
	e := newFakeEnv(t)
	flaky := &flakyStore{Store: e.st}
	flaky.n.Store(2)
	e.st = flaky
	svc, _ := e.start(t, jobs.ShellAgent{})
	if j := await(t, svc, submit(t, svc, "true", store.Limits{})); j.Status != store.StatusComplete || j.Attempts != 1 {
		t.Errorf("job %s after %d attempts: %q", j.Status, j.Attempts, j.Error)
	}
}

func TestShutdownReleasesRunningJobs(t *testing.T) {
	e := newFakeEnv(t)
	// The first attempt blocks; the one after the restart completes.
	task := "if [ -e marker ]; then echo second run; else touch marker; sleep 300; fi"
	svc, stop := e.start(t, jobs.ShellAgent{}, func(c *jobs.SchedulerConfig) { c.Grace = 100 * time.Millisecond })
	id := submit(t, svc, task, store.Limits{})
	waitFor(t, func() bool { return e.workspaceHas(id, "marker") })
	stop()
	j, _ := e.st.GetJob(bg, id)
	if j.Status != store.StatusPending || j.Attempts != 0 || j.LeaseOwner != "" {
		t.Fatalf("after shutdown: %s, %d attempts, owner %q", j.Status, j.Attempts, j.LeaseOwner)
	}
	e.assertNoSandboxes(t)
	svc, _ = e.start(t, jobs.ShellAgent{})
	if j := await(t, svc, id); j.Status != store.StatusComplete || j.Attempts != 1 {
		t.Errorf("after restart: %s, %d attempts", j.Status, j.Attempts)
	}
}

// workspaceHas reports whether the job's workspace holds name: in its
// running sandbox's loop disk (where the driver keeps a job's workspace
// while it runs, when it runs as root) or in the workspace directory.
func (e *env) workspaceHas(id, name string) bool {
	paths, _ := filepath.Glob(filepath.Join(e.dir, "sandboxes", "*", "disk", name))
	paths = append(paths, filepath.Join(workspaceDir(e.dir, id), name))
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 60s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
