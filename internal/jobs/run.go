package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/store"
)

// Agent does a job's work in its sandbox. The scheduler owns everything
// around it: the lease, the timeout, cancellation, the sandbox's life.
type Agent interface {
	// Run works on r.Job until it is done or ctx ends. An error means the
	// work could not go on (the job ends in error with it); a failed task is
	// an Outcome with StatusError.
	Run(ctx context.Context, r *Run) (Outcome, error)
}

// Run is one attempt at a job, as the agent sees it.
type Run struct {
	Job     store.Job
	Sandbox sandbox.Sandbox
	emit    func(ctx context.Context, typ string, payload any)
}

// Emit appends an event to the job's log and wakes its followers.
func (r *Run) Emit(ctx context.Context, typ string, payload any) { r.emit(ctx, typ, payload) }

// Outcome is how an attempt ended.
type Outcome struct {
	Status store.Status // complete or error
	Result string
	Error  string
	Steps  int
	Usage  store.Usage
}

// runJob runs one claimed job to its end.
func (s *Scheduler) runJob(ctx context.Context, cancel context.CancelCauseFunc, j store.Job) {
	log := s.log.With("job_id", j.ID, "attempt", j.Attempts)
	begin := time.Now()
	if j.CancelRequested {
		cancel(errCanceled)
	}
	timeout := j.Limits.Timeout
	if timeout <= 0 {
		timeout = s.cfg.DefaultTimeout
	}
	ctx, stop := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%w after %s", errTimeout, durationText(timeout)))
	defer stop()
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		s.heartbeat(ctx, cancel, j.ID)
	}()
	s.emit(ctx, j.ID, EventState, map[string]any{"status": store.StatusRunning, "attempt": j.Attempts, "worker": s.cfg.WorkerID})
	log.Info("job started")
	out, err := s.execute(ctx, cancel, j)
	cause := context.Cause(ctx)
	stop()
	<-hbDone
	s.finish(context.WithoutCancel(ctx), j, out, err, cause, time.Since(begin))
}

// heartbeat extends the lease until ctx ends; it cancels the job when the
// lease is lost or a cancel was requested through another server.
func (s *Scheduler) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, id string) {
	t := time.NewTicker(s.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		j, err := s.store.Heartbeat(ctx, id, s.cfg.WorkerID, s.cfg.Lease)
		switch {
		case errors.Is(err, store.ErrLeaseLost), errors.Is(err, store.ErrNotFound):
			cancel(errLeaseLost)
			return
		case err != nil:
			s.log.Warn("heartbeat", "job_id", id, "err", err) // retried next tick; the lease outlives two misses
		case j.CancelRequested:
			cancel(errCanceled)
		}
	}
}

// execute gives the job a sandbox on its workspace, runs the agent with a
// watchdog on the guest, and destroys the sandbox.
func (s *Scheduler) execute(ctx context.Context, cancel context.CancelCauseFunc, j store.Job) (Outcome, error) {
	ws := WorkspaceDir(s.cfg.DataDir, j.ID)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return Outcome{}, fmt.Errorf("workspace: %w", err)
	}
	begin := time.Now()
	sb, err := s.driver.Create(ctx, sandbox.Spec{JobID: j.ID, WorkspaceDir: ws, Limits: sandbox.Limits{
		MemoryBytes: j.Limits.MemoryBytes, NanoCPUs: j.Limits.NanoCPUs,
	}})
	if err != nil {
		return Outcome{}, fmt.Errorf("start sandbox: %w", err)
	}
	defer func() {
		if err := sb.Destroy(context.WithoutCancel(ctx)); err != nil {
			s.log.Error("destroy sandbox", "job_id", j.ID, "sandbox_id", sb.Handle().ID, "err", err)
		}
	}()
	s.metrics.sandboxStarted(time.Since(begin))
	if err := s.saveHandle(ctx, j.ID, sb.Handle()); err != nil {
		return Outcome{}, err
	}
	s.emit(ctx, j.ID, EventSandbox, map[string]any{"sandbox_id": sb.Handle().ID, "ready_ms": time.Since(begin).Milliseconds()})
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		s.watchdog(wctx, cancel, sb)
	}()
	defer func() {
		stopWatch()
		<-watched
	}()
	return s.agent.Run(ctx, &Run{Job: j, Sandbox: sb, emit: func(ctx context.Context, typ string, p any) {
		s.emit(ctx, j.ID, typ, p)
	}})
}

func (s *Scheduler) saveHandle(ctx context.Context, id string, h sandbox.Handle) error {
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("sandbox handle: %w", err)
	}
	_, err = s.store.UpdateJob(ctx, id, func(j *store.Job) error {
		j.Sandbox = b
		return nil
	})
	if err != nil {
		return fmt.Errorf("save sandbox handle: %w", err)
	}
	return nil
}

// watchdog ends the job when its guest stops answering. It returns when ctx
// ends; the goroutine is owned by execute, which cancels ctx before returning.
func (s *Scheduler) watchdog(ctx context.Context, cancel context.CancelCauseFunc, sb sandbox.Sandbox) {
	t := time.NewTicker(s.cfg.WatchdogInterval)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, hcancel := context.WithTimeout(ctx, s.cfg.WatchdogInterval)
		_, err := sb.Guest().Health(hctx)
		hcancel()
		if err == nil || ctx.Err() != nil {
			failures = 0
			continue
		}
		if failures++; failures >= s.cfg.WatchdogFailures {
			cancel(fmt.Errorf("%w: %w", errSandboxDied, err))
			return
		}
	}
}

// finish records how the attempt ended, unless the job was handed back
// (shutdown) or taken over (lease lost).
func (s *Scheduler) finish(ctx context.Context, j store.Job, out Outcome, runErr, cause error, took time.Duration) {
	log := s.log.With("job_id", j.ID)
	switch {
	case errors.Is(cause, errShutdown):
		if err := s.store.Release(ctx, j.ID, s.cfg.WorkerID); err != nil {
			log.Error("release job", "err", err)
			return
		}
		s.emit(ctx, j.ID, EventState, map[string]any{"status": store.StatusPending, "reason": "server shut down before the job ended; it will run again"})
		log.Info("job released")
		return
	case errors.Is(cause, errLeaseLost):
		log.Warn("lease lost; another worker owns the job now")
		return
	}
	status, msg := outcomeOf(out, runErr, cause)
	j2, err := s.store.UpdateJob(ctx, j.ID, func(x *store.Job) error {
		if x.LeaseOwner != s.cfg.WorkerID || x.Status != store.StatusRunning {
			return store.ErrLeaseLost
		}
		x.Status, x.Error, x.Result, x.EndedAt = status, msg, out.Result, time.Now().UTC()
		x.Steps += out.Steps
		x.Usage = addUsage(x.Usage, out.Usage)
		x.LeaseOwner, x.LeaseUntil = "", time.Time{}
		return nil
	})
	if err != nil {
		log.Error("record job end", "err", err)
		return
	}
	ev := map[string]any{"status": status}
	if msg != "" {
		ev["error"] = msg
	}
	s.emit(ctx, j.ID, EventState, ev)
	s.metrics.jobEnded(status, took)
	log.Info("job ended", "status", status, "error", msg, "steps", j2.Steps, "took", durationText(took))
}

// outcomeOf decides a job's final status: what stopped it first wins.
func outcomeOf(out Outcome, runErr, cause error) (store.Status, string) {
	switch {
	case errors.Is(cause, errCanceled):
		return store.StatusCanceled, errCanceled.Error()
	case cause != nil:
		return store.StatusError, cause.Error()
	case runErr != nil:
		return store.StatusError, runErr.Error()
	case out.Status == store.StatusComplete:
		return store.StatusComplete, ""
	}
	msg := out.Error
	if msg == "" {
		msg = "the agent ended without completing the task"
	}
	return store.StatusError, msg
}

func addUsage(a, b store.Usage) store.Usage {
	return store.Usage{
		InputTokens: a.InputTokens + b.InputTokens, OutputTokens: a.OutputTokens + b.OutputTokens,
		CacheReadTokens: a.CacheReadTokens + b.CacheReadTokens, CacheWriteTokens: a.CacheWriteTokens + b.CacheWriteTokens,
		CostUSD: a.CostUSD + b.CostUSD,
	}
}
