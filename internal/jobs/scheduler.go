package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/workspace"
)

// Causes a job's context is cancelled with; finish turns each into an outcome.
var (
	errCanceled    = errors.New("canceled by request")
	errTimeout     = errors.New("job timed out")
	errSandboxDied = errors.New("sandbox stopped answering")
	errLeaseLost   = errors.New("lease lost to another worker")
	errShutdown    = errors.New("server shutting down")
	errEngineDown  = errors.New("container engine unavailable")
)

// engineBackoff is how long claiming pauses after the engine was unreachable.
const engineBackoff = 5 * time.Second

// Defaults of SchedulerConfig's zero fields: the lease, job timeout and
// grace are the settings table's (AGENTBOX_LEASE, AGENTBOX_JOB_TIMEOUT,
// AGENTBOX_GRACE), written there once.
var (
	DefaultLease      = config.Default().Server.Lease
	DefaultJobTimeout = config.Default().Server.JobTimeout
	DefaultGrace      = config.Default().Server.Grace
)

// Defaults of SchedulerConfig's zero fields that are no setting.
const (
	DefaultPoll             = time.Second
	DefaultWatchdogInterval = 5 * time.Second
	DefaultWatchdogFailures = 3
)

// SchedulerConfig is everything a Scheduler is made of; NewScheduler fills
// in the defaults of its zero fields.
type SchedulerConfig struct {
	// Store holds the jobs; Feed is the process's live feed, shared with
	// its Service (nil: a feed of its own).
	Store store.Store
	Feed  *Feed
	// Driver makes the jobs' sandboxes and Agent does their work; a
	// scheduler that runs jobs (Concurrency > 0) needs both.
	Driver sandbox.Driver
	Agent  Agent
	// Metrics, if set, receives the scheduler's metrics.
	Metrics *Metrics
	// WorkerID names this worker in leases. It must be stable across restarts
	// of one server (so it can reclaim its own jobs at once) and unique among
	// servers sharing a store.
	WorkerID string
	// Concurrency is how many jobs run at once; 0 makes an API-only node.
	Concurrency int
	Lease       time.Duration // default DefaultLease
	Heartbeat   time.Duration // default Lease/3
	Poll        time.Duration // how often to look for work unwoken; default DefaultPoll
	// DefaultTimeout applies to jobs that set none; default DefaultJobTimeout.
	DefaultTimeout time.Duration
	// MaxOutputEvents caps the bytes of output events (commands' output as
	// it runs) one job stores; default AGENTBOX_LIVE_OUTPUT_MAX's.
	MaxOutputEvents int64
	// Grace is how long running jobs may finish after shutdown begins; then
	// they are stopped and their leases released. Zero means the default,
	// DefaultGrace; a negative value means no grace.
	Grace time.Duration
	// WatchdogInterval and WatchdogFailures: a job whose guest fails this
	// many health checks in a row ends in error. Defaults
	// DefaultWatchdogInterval and DefaultWatchdogFailures.
	WatchdogInterval time.Duration
	WatchdogFailures int
	// ReapInterval is how often expired leases and orphaned sandboxes are
	// looked for; default the lease, at most 1m: the jobs of a worker
	// that died run again within two leases.
	ReapInterval time.Duration
	// Images picks each new sandbox's image (image.Gate: the core while
	// the desktop layer builds); nil: the job's image as it is.
	Images Images
	// Workspaces keeps the jobs' workspaces; a worker (Concurrency > 0)
	// needs it.
	Workspaces workspace.Store
	// Repos keeps the jobs' git dirs: a job's first run clones its
	// repository or snapshots its starting workspace there. Nil: no
	// snapshot, and a repository job ends in error.
	Repos *Repos
	// Media keeps the images of the jobs' tool results; nil: none are.
	Media *Media
	// Checkpoints, if set, is the blob store the cluster shares: the
	// worker checkpoints its jobs' workspaces there at every step and at
	// the end, and their git dirs, and restores a job's before its
	// sandbox starts when the job last ran elsewhere. Nil: no checkpoints.
	Checkpoints *workspace.Shared
	// CheckpointMarks is a directory of this host, outside every
	// workspace, where the worker notes per job which checkpoint its local
	// workspace holds, so that a restarted worker keeps a workspace it
	// wrote itself; empty: the notes are kept in memory only.
	CheckpointMarks string
	// Address is where this worker's internal endpoint answers, as it
	// registers itself in the store's worker registry; Register is how
	// often it refreshes its entry (default WorkerHeartbeat). A scheduler
	// with Concurrency 0 does not register.
	Address  string
	Register time.Duration
	// Egress gives each job's sandbox its way out through the egress
	// proxy; nil: sandboxes have no way out at all.
	Egress *Egress
	Log    *slog.Logger
}

func (c *SchedulerConfig) defaults() {
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	c.Heartbeat = cmp.Or(c.Heartbeat, c.Lease/3)
	c.Poll = cmp.Or(c.Poll, DefaultPoll)
	c.DefaultTimeout = cmp.Or(c.DefaultTimeout, DefaultJobTimeout)
	c.Grace = max(cmp.Or(c.Grace, DefaultGrace), 0)
	c.WatchdogInterval = cmp.Or(c.WatchdogInterval, DefaultWatchdogInterval)
	c.WatchdogFailures = cmp.Or(c.WatchdogFailures, DefaultWatchdogFailures)
	c.ReapInterval = cmp.Or(c.ReapInterval, reapInterval(c.Lease))
	c.Register = cmp.Or(c.Register, WorkerHeartbeat)
	c.Log = cmp.Or(c.Log, slog.New(slog.DiscardHandler))
	if c.Feed == nil {
		c.Feed = NewFeed(c.Store, c.Log)
	}
}

// Scheduler claims pending jobs and runs each in a fresh sandbox through the
// Agent, heartbeating its lease, until the job ends or the server stops.
type Scheduler struct {
	cfg     SchedulerConfig
	store   store.Store
	driver  sandbox.Driver
	agent   Agent
	feed    *Feed
	metrics *Metrics
	log     *slog.Logger
	ckpt    *checkpoints

	mu         sync.Mutex
	running    map[string]context.CancelCauseFunc
	sandboxes  map[string]sandbox.Sandbox // of running jobs, for Service.Guest
	pauseUntil time.Time                  // no claims before this (engine outage)
	jobs       sync.WaitGroup
}

// NewScheduler returns the scheduler cfg describes; Run starts it.
func NewScheduler(cfg SchedulerConfig) *Scheduler {
	cfg.defaults()
	cfg.Metrics.setLease(cfg.Lease)
	return &Scheduler{
		cfg: cfg, store: cfg.Store, driver: cfg.Driver, agent: cfg.Agent, feed: cfg.Feed, metrics: cfg.Metrics, log: cfg.Log,
		running: map[string]context.CancelCauseFunc{}, sandboxes: map[string]sandbox.Sandbox{}, ckpt: newCheckpoints(cfg.CheckpointMarks),
	}
}

// Run recovers what a previous life left, then claims and runs jobs until
// ctx ends (woken by its Feed, which the caller runs: Feed.Run); it
// then stops claiming, gives running jobs the grace period, stops the rest
// and releases their leases, and returns when all are done. A scheduler
// that runs jobs keeps its entry in the store's worker registry meanwhile
// and removes it at the end.
func (s *Scheduler) Run(ctx context.Context) error {
	regCtx, stopRegistry := context.WithCancel(context.WithoutCancel(ctx))
	registered := s.startRegistry(regCtx)
	defer func() {
		stopRegistry()
		<-registered
	}()
	if s.cfg.Concurrency > 0 {
		// Only a worker reclaims its previous life's jobs: an API-only node
		// must not take over a worker's jobs.
		s.reclaim(ctx, s.cfg.WorkerID)
	}
	var loops sync.WaitGroup
	loops.Add(1)
	go func() {
		defer loops.Done()
		s.reapLoop(ctx)
	}()
	if s.cfg.Concurrency > 0 {
		s.claimLoop(ctx)
	} else {
		<-ctx.Done()
	}
	loops.Wait()
	s.shutdown()
	return nil
}

// reapLoop periodically requeues jobs whose worker died and removes this
// worker's orphaned sandboxes, also while every slot is busy.
func (s *Scheduler) reapLoop(ctx context.Context) {
	tick(ctx, s.cfg.ReapInterval, func() bool {
		s.reclaim(ctx, "")
		return true
	})
}

func (s *Scheduler) claimLoop(ctx context.Context) {
	slots := make(chan struct{}, s.cfg.Concurrency)
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		if wait := s.paused(); wait > 0 {
			<-slots
			s.idle(ctx, wait)
			continue
		}
		j, err := s.store.ClaimJob(ctx, s.cfg.WorkerID, s.cfg.Lease)
		if err != nil {
			<-slots
			if !errors.Is(err, store.ErrNoJob) && ctx.Err() == nil {
				s.log.Error("claim job", "err", err)
			}
			s.idle(ctx, s.cfg.Poll)
			continue
		}
		s.metrics.claimed(j)
		s.start(ctx, j, func() { <-slots })
	}
}

// idle waits for a wake-up, d, or the end of ctx.
func (s *Scheduler) idle(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.feed.pending:
	case <-t.C:
	case <-ctx.Done():
	}
}

// pause stops claiming for a while; paused says how much of it is left.
func (s *Scheduler) pause(d time.Duration) {
	s.mu.Lock()
	s.pauseUntil = time.Now().Add(d)
	s.mu.Unlock()
}

func (s *Scheduler) paused() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Until(s.pauseUntil)
}

// start runs a claimed job in its own goroutine, owned by s.jobs. The job's
// context is not the server's: shutdown stops jobs only after the grace.
func (s *Scheduler) start(ctx context.Context, j store.Job, done func()) {
	jctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	s.mu.Lock()
	s.running[j.ID] = cancel
	s.mu.Unlock()
	s.jobs.Add(1)
	go func() {
		defer s.jobs.Done()
		defer done()
		defer func() {
			s.mu.Lock()
			delete(s.running, j.ID)
			s.mu.Unlock()
			cancel(nil)
		}()
		s.runJob(jctx, cancel, j)
	}()
}

func (s *Scheduler) shutdown() {
	done := make(chan struct{})
	go func() {
		s.jobs.Wait()
		close(done)
	}()
	t := time.NewTimer(s.cfg.Grace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	s.mu.Lock()
	n := len(s.running)
	for _, cancel := range s.running {
		cancel(errShutdown)
	}
	s.mu.Unlock()
	s.log.Info("grace period over: stopping running jobs and releasing their leases", "jobs", n)
	<-done
}

// cancelLocal stops a job if this worker runs it. A job on another server
// learns of the cancel from its next heartbeat.
func (s *Scheduler) cancelLocal(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cancel, ok := s.running[id]; ok {
		cancel(errCanceled)
	}
}

func (s *Scheduler) isRunning(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.running[id]
	return ok
}

func (s *Scheduler) emit(ctx context.Context, id string, p event.Payload) {
	if err := s.feed.emit(ctx, id, p); err != nil {
		s.log.Error("append event", "job_id", id, "type", p.EventType(), "err", err)
	}
}

func durationText(d time.Duration) string { return fmt.Sprint(d.Round(time.Millisecond)) }
