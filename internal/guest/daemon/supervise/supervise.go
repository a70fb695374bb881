// Package supervise owns the guest's supervisor of long-lived services:
// programs described by a Spec (the desktop's X server, VNC and noVNC,
// Jupyter's notebook server) that start on first need, each in a process
// group of its own with its output in a capped log file, are restarted with
// backoff when they exit, given up on when they keep crashing, and stopped
// together when the guest shuts down.
package supervise

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon/proc"
)

// The supervisor runs the sandbox's long-lived services (the X display, its
// window manager, VNC, noVNC, Jupyter). Nothing starts until a service is
// first needed; then each runs in its own process group with its output in
// /tmp/agentbox-<name>.log, is restarted with backoff when it exits, and is
// given up on when it keeps crashing. Stop ends them all.

// Spec describes one supervised program.
type Spec struct {
	// Name is what Ensure knows it by.
	Name string
	// Deps are started, and ready, before this service starts.
	Deps []string
	// Argv is the program and its arguments.
	Argv []string
	// Setup, if set, runs before every start.
	Setup func() error
	// Ready probes once whether the service answers; nil means it does.
	Ready func(ctx context.Context) error
	// Recheck probes on every Ensure, not only after a start, so a service
	// that died a moment ago is not reported running. Only for cheap probes.
	// A failed re-check replaces the process only if it exited or refuses
	// connections: a slow answer may just be a busy machine.
	Recheck bool
}

// Config holds the supervisor's environment and timings; zero
// timings take the defaults.
type Config struct {
	Log *slog.Logger
	// Environ returns the services' environment (default os.Environ).
	Environ func() ([]string, error)
	// Dir is the services' working directory.
	Dir string
	// LogDir holds the services' logs, agentbox-<name>.log (default
	// os.TempDir()).
	LogDir string
	// Groups name sets of services ensured together.
	Groups map[string][]string
	// ReadyTimeout bounds how long a start waits for the service to answer.
	ReadyTimeout time.Duration
	// StopGrace is how long a service may take to exit after SIGTERM.
	StopGrace time.Duration
	// CrashLimit exits within CrashWindow make a crash loop: the service is
	// no longer restarted until CrashWindow has passed since its last exit.
	CrashLimit  int
	CrashWindow time.Duration
	// Backoff is the delay before the first restart; it doubles with each
	// further exit within CrashWindow, up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// Poll is how often readiness is probed.
	Poll time.Duration
	// Fresh is how long a re-checked service's last good answer is
	// trusted, so a burst of requests (a page's assets) probes it once.
	Fresh time.Duration
	// LogCap is the size at which a service's log file is emptied.
	LogCap int64
}

func (c *Config) defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&c.ReadyTimeout, 20*time.Second)
	set(&c.StopGrace, 2*time.Second)
	set(&c.CrashWindow, 30*time.Second)
	set(&c.Backoff, 200*time.Millisecond)
	set(&c.MaxBackoff, 5*time.Second)
	set(&c.Poll, 25*time.Millisecond)
	set(&c.Fresh, time.Second)
	if c.CrashLimit <= 0 {
		c.CrashLimit = 5
	}
	if c.LogCap <= 0 {
		c.LogCap = 8 << 20
	}
	if c.LogDir == "" {
		c.LogDir = os.TempDir()
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Environ == nil {
		c.Environ = func() ([]string, error) { return os.Environ(), nil }
	}
}

// Supervisor starts services on demand and keeps them running.
type Supervisor struct {
	cfg Config
	// ctx is the supervisor's lifetime; cancelled when stopping begins.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// wg owns the watcher and log-copier goroutines.
	wg sync.WaitGroup

	mu       sync.Mutex
	stopping bool
	svcs     map[string]*service
	pipes    map[*os.File]struct{} // read ends of service output being copied
}

// service is the state of one supervised program.
type service struct {
	spec *Spec
	// sem is held by whoever starts or checks the service, so concurrent
	// ensures never start it twice.
	sem chan struct{}
	// Guarded by supervisor.mu:
	proc   *process     // the running process; nil when none
	exits  []time.Time  // exits within the crash window, oldest first
	failed *guest.Error // set when the service crash-looped
}

// process is one run of a service.
type process struct {
	cmd     *exec.Cmd
	started time.Time
	// Guarded by supervisor.mu:
	ready     bool
	answered  time.Time // when a probe last succeeded
	abandoned bool      // killed by the supervisor; not to be restarted
	// reaped is closed once the exit is recorded; copied once the output
	// pipe reached end of file.
	reaped, copied chan struct{}
}

var errStopping = errors.New("guest is shutting down")

// New returns a Supervisor of specs; nothing runs yet.
func New(cfg Config, specs ...*Spec) *Supervisor {
	cfg.defaults()
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &Supervisor{cfg: cfg, ctx: ctx, cancel: cancel, svcs: map[string]*service{}, pipes: map[*os.File]struct{}{}}
	for _, spec := range specs {
		s.svcs[spec.Name] = &service{spec: spec, sem: make(chan struct{}, 1)}
	}
	return s
}

// Ensure makes the named service or group, and what it depends on, run and
// answer. It returns a *guest.Error: guest.CodeNotFound for an unknown name,
// guest.CodeService (with the tail of the service's log) when it cannot
// start.
func (s *Supervisor) Ensure(ctx context.Context, name string) error {
	// Waits end when the caller goes or the supervisor stops, whichever first.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(s.ctx, func() { cancel(errStopping) })()
	for _, n := range s.members(name) {
		if err := s.ensureTree(ctx, n, nil); err != nil {
			return err
		}
	}
	return nil
}

// members lists the services of a group, or the one service name.
func (s *Supervisor) members(name string) []string {
	if names, ok := s.cfg.Groups[name]; ok {
		return names
	}
	return []string{name}
}

// Doubt makes the next Ensure of name (a service or group) probe it again,
// however recently it answered: a caller that just failed to reach it
// knows better.
func (s *Supervisor) Doubt(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.members(name) {
		if svc, ok := s.svcs[n]; ok && svc.proc != nil {
			svc.proc.answered = time.Time{}
		}
	}
}

// ensureTree ensures name's dependencies, then name.
func (s *Supervisor) ensureTree(ctx context.Context, name string, path []string) error {
	svc, ok := s.svcs[name]
	if !ok {
		return guest.Errorf(guest.CodeNotFound, "no service %q", name)
	}
	for _, p := range path {
		if p == name {
			return guest.Errorf(guest.CodeInternal, "service dependency cycle: %s", strings.Join(append(path, name), " -> "))
		}
	}
	for _, dep := range svc.spec.Deps {
		if err := s.ensureTree(ctx, dep, append(path, name)); err != nil {
			return err
		}
	}
	return s.ensureOne(ctx, svc)
}

// ensureOne starts svc if it is not running and waits until it answers,
// restarting it (with backoff) if it exits meanwhile.
func (s *Supervisor) ensureOne(ctx context.Context, svc *service) error {
	if err := s.acquire(ctx, svc.sem); err != nil {
		return err
	}
	defer func() { <-svc.sem }()
	deadline := time.Now().Add(s.cfg.ReadyTimeout)
	for {
		p, wait, err := s.current(svc)
		if err != nil {
			return err
		}
		if p == nil {
			if err := Sleep(ctx, wait); err != nil {
				return guest.Errorf(guest.CodeService, "%s: waiting to restart it: %v", svc.spec.Name, err)
			}
			if p, err = s.start(svc); err != nil {
				return err
			}
		}
		if done, err := s.awaitReady(ctx, svc, p, deadline); done || err != nil {
			return err
		}
	}
}

// current returns svc's running process (nil if none, with how long to wait
// before starting it), or why it must not be started.
func (s *Supervisor) current(svc *service) (*process, time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil, 0, guest.Errorf(guest.CodeService, "%s: %v", svc.spec.Name, errStopping)
	}
	now := time.Now()
	svc.exits = recent(svc.exits, now.Add(-s.cfg.CrashWindow))
	if svc.failed != nil {
		if len(svc.exits) > 0 {
			return nil, 0, svc.failed
		}
		svc.failed = nil // the crash window has passed: try again
	}
	if svc.proc != nil || len(svc.exits) == 0 {
		return svc.proc, 0, nil
	}
	last := svc.exits[len(svc.exits)-1]
	return nil, last.Add(s.backoff(len(svc.exits))).Sub(now), nil
}

// awaitReady waits until p answers (done), or exits (not done: the caller
// restarts it). A process that answered before is only re-checked (see
// recheck); a new one that does not answer by the deadline is killed.
func (s *Supervisor) awaitReady(ctx context.Context, svc *service, p *process, deadline time.Time) (bool, error) {
	if ready, fresh := s.readiness(p); ready {
		if !svc.spec.Recheck || fresh {
			return true, nil
		}
		return s.recheck(ctx, svc, p, deadline)
	}
	tick := time.NewTicker(s.cfg.Poll)
	defer tick.Stop()
	timeout := time.NewTimer(time.Until(deadline))
	defer timeout.Stop()
	for {
		if err := s.probe(ctx, svc, time.Second); err == nil {
			s.markReady(svc, p)
			return true, nil
		}
		select {
		case <-p.reaped:
			return false, nil
		case <-tick.C:
		case <-timeout.C:
			s.abandon(p)
			return true, guest.Errorf(guest.CodeService, "%s did not answer within %v%s", svc.spec.Name, s.cfg.ReadyTimeout, s.logTail(svc.spec.Name))
		case <-ctx.Done():
			return true, guest.Errorf(guest.CodeService, "%s: waiting for it to start: %v", svc.spec.Name, context.Cause(ctx))
		}
	}
}

// recheckProbe bounds one probe of a process that answered before: long
// enough for a busy server to answer, short enough to notice an exit soon.
const recheckProbe = 5 * time.Second

// recheck probes p, which answered before, until it answers again. If it
// has exited (not done: the caller restarts it) or refuses connections (it
// is killed, and restarted), it is replaced. If it is merely slow — a
// CPU-starved server, whose kernels hold the user's state — it is left
// running and the caller told it is busy.
func (s *Supervisor) recheck(ctx context.Context, svc *service, p *process, deadline time.Time) (bool, error) {
	for {
		err := s.probe(ctx, svc, min(recheckProbe, time.Until(deadline)))
		switch {
		case err == nil:
			s.markAnswered(p)
			return true, nil
		case errors.Is(err, syscall.ECONNREFUSED):
			s.cfg.Log.Warn("service refuses connections; restarting it", "service", svc.spec.Name, "err", err)
			proc.KillTree(p.cmd.Process.Pid)
			<-p.reaped
			return false, nil
		}
		select {
		case <-p.reaped:
			return false, nil
		case <-ctx.Done():
			return true, guest.Errorf(guest.CodeService, "%s: waiting for it to answer: %v", svc.spec.Name, context.Cause(ctx))
		default:
		}
		if !time.Now().Before(deadline) {
			return true, guest.Errorf(guest.CodeService, "%s is running but did not answer within %v (last: %v); it is busy, perhaps short of CPU, and was left running: try again", svc.spec.Name, s.cfg.ReadyTimeout, err)
		}
		if err := Sleep(ctx, s.cfg.Poll); err != nil {
			return true, guest.Errorf(guest.CodeService, "%s: waiting for it to answer: %v", svc.spec.Name, err)
		}
	}
}

func (s *Supervisor) markReady(svc *service, p *process) {
	s.mu.Lock()
	p.ready, p.answered = true, time.Now()
	s.mu.Unlock()
	s.cfg.Log.Info("service ready", "service", svc.spec.Name, "after", time.Since(p.started).Round(time.Millisecond))
}

func (s *Supervisor) markAnswered(p *process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.answered = time.Now()
}

// readiness says whether p has answered, and whether it did within Fresh.
func (s *Supervisor) readiness(p *process) (ready, fresh bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return p.ready, time.Since(p.answered) < s.cfg.Fresh
}

// probe asks svc once whether it answers, waiting at most timeout.
func (s *Supervisor) probe(ctx context.Context, svc *service, timeout time.Duration) error {
	if svc.spec.Ready == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return svc.spec.Ready(ctx)
}

// acquire takes sem unless ctx ends first.
func (s *Supervisor) acquire(ctx context.Context, sem chan struct{}) error {
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return guest.Errorf(guest.CodeService, "waiting for a service: %v", context.Cause(ctx))
	}
}

// Sleep waits d unless ctx ends first (or has ended, whatever d), and
// then returns its cause.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return context.Cause(ctx)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// backoff is the delay before restarting after n recent exits.
func (s *Supervisor) backoff(n int) time.Duration {
	d := s.cfg.Backoff
	for i := 1; i < n && d < s.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.cfg.MaxBackoff)
}

func recent(ts []time.Time, since time.Time) []time.Time {
	i := sort.Search(len(ts), func(i int) bool { return ts[i].After(since) })
	return ts[i:]
}
