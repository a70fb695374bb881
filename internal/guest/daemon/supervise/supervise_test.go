package supervise

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
)

// testSupervisor returns a supervisor of specs with fast timings, stopped
// when the test ends.
func testSupervisor(t *testing.T, mod func(*Config), specs ...*Spec) *Supervisor {
	t.Helper()
	cfg := Config{
		LogDir: t.TempDir(), Dir: t.TempDir(),
		ReadyTimeout: 5 * time.Second, StopGrace: 500 * time.Millisecond,
		Backoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Poll: 5 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	s := New(cfg, specs...)
	t.Cleanup(s.Stop)
	return s
}

// pidOf returns the pid of the service's running process, or 0.
func (s *Supervisor) pidOf(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.svcs[name].proc; p != nil && p.ready {
		return p.cmd.Process.Pid
	}
	return 0
}

// eventually fails the test unless cond holds within 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

func codeOf(err error) string {
	var e *guest.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func TestEnsureStartsOnceUnderConcurrentCalls(t *testing.T) {
	var starts atomic.Int32
	var readyAt atomic.Int64
	spec := &Spec{
		Name: "svc",
		Argv: []string{"sleep", "60"},
		Setup: func() error {
			starts.Add(1)
			readyAt.Store(time.Now().Add(50 * time.Millisecond).UnixNano())
			return nil
		},
		Ready: func(context.Context) error {
			if time.Now().UnixNano() < readyAt.Load() {
				return errors.New("not yet")
			}
			return nil
		},
	}
	s := testSupervisor(t, nil, spec)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() { errs <- s.Ensure(context.Background(), "svc") })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := starts.Load(); n != 1 {
		t.Fatalf("started %d times, want 1", n)
	}
	if !alive(s.pidOf("svc")) {
		t.Fatal("service not running after ensure")
	}
}

func TestEnsureStartsDependenciesFirst(t *testing.T) {
	var mu sync.Mutex
	var order []string
	spec := func(name string, deps ...string) *Spec {
		return &Spec{Name: name, Deps: deps, Argv: []string{"sleep", "60"}, Setup: func() error {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, name)
			return nil
		}}
	}
	s := testSupervisor(t, func(c *Config) { c.Groups = map[string][]string{"all": {"top", "other"}} },
		spec("base"), spec("mid", "base"), spec("top", "mid", "base"), spec("other"))
	if err := s.Ensure(context.Background(), "all"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, ","); got != "base,mid,top,other" {
		t.Fatalf("start order %s, want base,mid,top,other", got)
	}
	if err := s.Ensure(context.Background(), "nope"); codeOf(err) != guest.CodeNotFound {
		t.Fatalf("unknown service: err = %v, want not_found", err)
	}
}

func TestCrashedServiceIsRestarted(t *testing.T) {
	s := testSupervisor(t, nil, &Spec{Name: "svc", Argv: []string{"sleep", "60"}})
	if err := s.Ensure(context.Background(), "svc"); err != nil {
		t.Fatal(err)
	}
	first := s.pidOf("svc")
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The watcher restarts it without anyone asking.
	eventually(t, "a restart", func() bool { p := s.pidOf("svc"); return p != 0 && p != first })
	if err := s.Ensure(context.Background(), "svc"); err != nil {
		t.Fatalf("ensure after restart: %v", err)
	}
}

func TestCrashLoopStopsRestartsAndReportsLog(t *testing.T) {
	var starts atomic.Int32
	spec := &Spec{
		Name:  "bad",
		Argv:  []string{"sh", "-c", "echo cannot open display: boom >&2; exit 3"},
		Setup: func() error { starts.Add(1); return nil },
		Ready: func(context.Context) error { return errors.New("never") },
	}
	s := testSupervisor(t, nil, spec)
	err := s.Ensure(context.Background(), "bad")
	if codeOf(err) != guest.CodeService || !strings.Contains(err.Error(), "keeps crashing") || !strings.Contains(err.Error(), "cannot open display: boom") {
		t.Fatalf("err = %v, want a service error with the log's tail", err)
	}
	n := starts.Load()
	if n != int32(s.cfg.CrashLimit) {
		t.Errorf("started %d times before giving up, want %d", n, s.cfg.CrashLimit)
	}
	if err := s.Ensure(context.Background(), "bad"); codeOf(err) != guest.CodeService {
		t.Fatalf("second ensure: err = %v, want the crash-loop error", err)
	}
	if starts.Load() != n {
		t.Error("a crash-looped service was started again within the crash window")
	}
}

func TestCrashLoopIsRetriedAfterTheWindow(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "fixed")
	spec := &Spec{
		Name: "flaky",
		Argv: []string{"sh", "-c", "test -e " + marker + " || exit 1; exec sleep 60"},
		Ready: func(context.Context) error {
			if _, err := os.Stat(marker); err != nil {
				return err
			}
			return nil
		},
	}
	s := testSupervisor(t, func(c *Config) { c.CrashWindow = 300 * time.Millisecond }, spec)
	if err := s.Ensure(context.Background(), "flaky"); codeOf(err) != guest.CodeService {
		t.Fatalf("err = %v, want a crash loop", err)
	}
	os.WriteFile(marker, nil, 0o644)
	eventually(t, "a retry after the crash window", func() bool { return s.Ensure(context.Background(), "flaky") == nil })
}

func TestServiceThatNeverAnswersIsKilled(t *testing.T) {
	s := testSupervisor(t, func(c *Config) { c.ReadyTimeout = 200 * time.Millisecond },
		&Spec{Name: "mute", Argv: []string{"sleep", "60"}, Ready: func(context.Context) error { return errors.New("no") }})
	err := s.Ensure(context.Background(), "mute")
	if codeOf(err) != guest.CodeService || !strings.Contains(err.Error(), "did not answer within") {
		t.Fatalf("err = %v, want a readiness timeout", err)
	}
	s.mu.Lock()
	p := s.svcs["mute"].proc
	s.mu.Unlock()
	if p != nil {
		t.Fatal("the unready process is still recorded as running")
	}
}

func TestEnsureHonoursCallerContext(t *testing.T) {
	s := testSupervisor(t, nil,
		&Spec{Name: "slow", Argv: []string{"sleep", "60"}, Ready: func(context.Context) error { return errors.New("no") }})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := s.Ensure(ctx, "slow"); codeOf(err) != guest.CodeService {
		t.Fatalf("err = %v, want a service error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("ensure returned after %v, long after its context ended", d)
	}
}

func TestStopEndsEveryServiceAndItsGroup(t *testing.T) {
	dir := t.TempDir()
	child := filepath.Join(dir, "child.pid")
	s := testSupervisor(t, nil,
		&Spec{Name: "polite", Argv: []string{"sleep", "60"}},
		// Ignores SIGTERM and leaves a child in its group: both need SIGKILL.
		&Spec{Name: "stubborn", Argv: []string{"sh", "-c", "trap '' TERM; sleep 60 & echo $! > " + child + "; wait"},
			Ready: func(context.Context) error { _, err := os.Stat(child); return err }})
	for _, name := range []string{"polite", "stubborn"} {
		if err := s.Ensure(context.Background(), name); err != nil {
			t.Fatal(err)
		}
	}
	pids := []int{s.pidOf("polite"), s.pidOf("stubborn"), readPid(t, child)}
	start := time.Now()
	s.Stop()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stop took %v", d)
	}
	for _, pid := range pids {
		eventually(t, "process exit", func() bool { return !alive(pid) })
	}
	if err := s.Ensure(context.Background(), "polite"); codeOf(err) != guest.CodeService {
		t.Fatalf("ensure after stop: err = %v, want a service error", err)
	}
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	for _, c := range strings.TrimSpace(string(b)) {
		pid = pid*10 + int(c-'0')
	}
	return pid
}

func TestServiceLogIsTruncatedAndCapped(t *testing.T) {
	s := testSupervisor(t, func(c *Config) { c.LogCap = 1000 },
		&Spec{Name: "chatty", Argv: []string{"sh", "-c", "for i in $(seq 200); do echo line $i; done; echo last-line; exec sleep 60"}})
	path := s.logPath("chatty")
	os.WriteFile(path, []byte("an earlier run's output\n"), 0o600)
	if err := s.Ensure(context.Background(), "chatty"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the last line in the log", func() bool {
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), "last-line")
	})
	b, _ := os.ReadFile(path)
	if len(b) > 1100 || strings.Contains(string(b), "earlier run") || !strings.Contains(string(b), "log emptied") {
		t.Fatalf("log (%d bytes) not truncated on start and capped:\n%s", len(b), b)
	}
}

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	s := New(Config{Backoff: 100 * time.Millisecond, MaxBackoff: time.Second})
	for n, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 30: time.Second} {
		if got := s.backoff(n); got != want {
			t.Errorf("backoff(%d) = %v, want %v", n, got, want)
		}
	}
}

// switchable is a service probe whose answer a test changes: nil, a slow
// answer (no answer until the probe gives up), or a refused connection
// once (then nil, as from the process that replaces the refusing one).
type switchable struct {
	mode   atomic.Value // string: "ok", "slow" or "refused"
	probes atomic.Int32
}

func (p *switchable) ready(ctx context.Context) error {
	p.probes.Add(1)
	switch p.mode.Load() {
	case "slow":
		<-ctx.Done()
		return ctx.Err()
	case "refused":
		p.mode.Store("ok")
		return &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}
	}
	return nil
}

func TestReadyServiceThatTurnsSlowIsLeftRunning(t *testing.T) {
	probe := &switchable{}
	probe.mode.Store("ok")
	s := testSupervisor(t, func(c *Config) { c.ReadyTimeout, c.Fresh = 300*time.Millisecond, 50*time.Millisecond },
		&Spec{Name: "busy", Argv: []string{"sleep", "60"}, Ready: probe.ready, Recheck: true})
	if err := s.Ensure(context.Background(), "busy"); err != nil {
		t.Fatal(err)
	}
	pid := s.pidOf("busy")
	probe.mode.Store("slow")
	time.Sleep(60 * time.Millisecond) // past Fresh: the next ensure probes again
	err := s.Ensure(context.Background(), "busy")
	if codeOf(err) != guest.CodeService || !strings.Contains(err.Error(), "left running") {
		t.Fatalf("err = %v, want a service error saying it was left running", err)
	}
	if !alive(pid) || s.pidOf("busy") != pid {
		t.Fatalf("the slow service (pid %d) was replaced by %d or killed", pid, s.pidOf("busy"))
	}
	probe.mode.Store("ok")
	if err := s.Ensure(context.Background(), "busy"); err != nil || s.pidOf("busy") != pid {
		t.Fatalf("once it answers again: err = %v, pid %d, want the same process %d", err, s.pidOf("busy"), pid)
	}
}

func TestReadyServiceThatRefusesIsReplaced(t *testing.T) {
	probe := &switchable{}
	probe.mode.Store("ok")
	s := testSupervisor(t, func(c *Config) { c.Fresh = time.Nanosecond },
		&Spec{Name: "dead", Argv: []string{"sleep", "60"}, Ready: probe.ready, Recheck: true})
	if err := s.Ensure(context.Background(), "dead"); err != nil {
		t.Fatal(err)
	}
	pid := s.pidOf("dead")
	probe.mode.Store("refused")
	if err := s.Ensure(context.Background(), "dead"); err != nil {
		t.Fatal(err)
	}
	if p := s.pidOf("dead"); p == pid || p == 0 {
		t.Fatalf("pid %d after the process refused connections, want a new one", p)
	}
	eventually(t, "the old process's exit", func() bool { return !alive(pid) })
}

func TestReadyServiceProbedOncePerFreshPeriodUnlessDoubted(t *testing.T) {
	probe := &switchable{}
	probe.mode.Store("ok")
	s := testSupervisor(t, func(c *Config) { c.Fresh = time.Minute },
		&Spec{Name: "web", Argv: []string{"sleep", "60"}, Ready: probe.ready, Recheck: true})
	for range 50 {
		if err := s.Ensure(context.Background(), "web"); err != nil {
			t.Fatal(err)
		}
	}
	if n := probe.probes.Load(); n != 1 {
		t.Fatalf("probed %d times in 50 ensures, want once", n)
	}
	s.Doubt("web") // a caller could not reach it
	if err := s.Ensure(context.Background(), "web"); err != nil || probe.probes.Load() != 2 {
		t.Fatalf("after doubt: err = %v, %d probes, want a second probe", err, probe.probes.Load())
	}
}
