package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/agentbox/agentbox/internal/egress"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/guest"
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

// DesktopAgent is an Agent whose jobs may use the sandbox's desktop or
// notebook (the computer and python tools): their sandboxes need the
// sandbox image's desktop layer, and wait for it while it builds.
type DesktopAgent interface {
	UsesDesktop() bool
}

// Run is one attempt at a job, as the agent sees it.
type Run struct {
	Job     store.Job
	Sandbox sandbox.Sandbox
	emit    func(ctx context.Context, p event.Payload)
	// progress records the attempt's totals so far on the job (nil: ignored).
	progress func(ctx context.Context, p Progress) error
	// events reads the job's log (nil: empty).
	events func(ctx context.Context, after int64, limit int) ([]store.Event, error)
	// keep keeps an image of a tool result (nil: none is kept).
	keep func(step int, data []byte) string
	// network is the job's egress proxy (nil: the sandbox has no way out).
	network *jobEgress
	// Recovered is true when the sandbox outlived an earlier attempt (a
	// restart): its processes and files are as that attempt left them.
	Recovered bool
	// Restored is set when the workspace was replaced by a checkpoint from
	// the shared blob store before a new sandbox started on it: the job
	// moved here from a worker that was lost, and its files are as they
	// were at that checkpoint, maybe steps behind the log.
	Restored *Restored

	// maxOutput caps the bytes of output events of the job (0: the default).
	maxOutput  int64
	budgetOnce sync.Once
	budget     *outputBudget
}

// Restored says which checkpoint a run's workspace was restored from.
type Restored struct {
	// Step is the job's step the checkpoint was taken after (0: before
	// any, as an upload staged by an API replica is).
	Step int
}

// EgressPolicy is the job's egress policy in force as the attempt
// starts, presets and secrets expanded: what the system prompt states.
func (r *Run) EgressPolicy() egress.Effective {
	if r.network == nil {
		return egress.Effective{Mode: egress.ModeNone}
	}
	return r.network.cfg.Effective(JobNetwork(r.Job))
}

// EgressDenials is what the job's egress proxy refused, for a failed
// tool's result; nil when the job has no proxy.
func (r *Run) EgressDenials() interface {
	Denied(since time.Time) []event.Network
} {
	if r.network == nil {
		return nil
	}
	return r.network
}

// History returns the job's whole event log so far, from earlier attempts
// too, so an agent can pick up where a restart cut it off.
func (r *Run) History(ctx context.Context) ([]store.Event, error) {
	var all []store.Event
	for r.events != nil {
		evs, err := r.events(ctx, lastSeq(all), 5000)
		if err != nil {
			return nil, fmt.Errorf("job history: %w", err)
		}
		if len(evs) == 0 {
			break
		}
		all = append(all, evs...)
	}
	return all, nil
}

func lastSeq(evs []store.Event) int64 {
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

// Emit appends an event to the job's log and wakes its followers.
func (r *Run) Emit(ctx context.Context, p event.Payload) {
	if r.emit != nil {
		r.emit(ctx, p)
	}
}

// KeepImage keeps an image a tool result of step carried, for the job's
// timeline, and returns its name for the result's event (see Media); ""
// when it is not kept. It never fails the job: a failure to write is
// logged.
func (r *Run) KeepImage(step int, data []byte) string {
	if r.keep == nil {
		return ""
	}
	return r.keep(step, data)
}

// Progress is what an attempt has done so far.
type Progress struct {
	Steps         int
	Usage         store.Usage
	ContextTokens int64
}

// Report records the attempt's progress on the job, so its status shows
// steps, usage and context size while it runs.
func (r *Run) Report(ctx context.Context, p Progress) error {
	if r.progress == nil {
		return nil
	}
	return r.progress(ctx, p)
}

// Outcome is how an attempt ended.
type Outcome struct {
	Status store.Status // complete or error
	Result string
	Error  string
	Steps  int
	Usage  store.Usage
	// Seen is the seq of the last event the agent read for the user's
	// messages (Run.Messages); 0 for an agent that reads none. A message
	// after it came too late for the turn: it starts the next one.
	Seen int64

	// git is what the host did with the job's repository once the turn
	// completed (handBack), recorded with the outcome.
	git *store.Git
	// left is why the turn's sandbox could not be destroyed: nothing may
	// read its workspace then.
	left error
	// ws is the workspace's directory, once a sandbox ran on it.
	ws string
}

// runJob runs one claimed job to its end. The heartbeat lasts until the
// outcome is recorded, so the lease cannot lapse while a sandbox is torn
// down or a completed turn is pushed (under the job's life, not its
// timeout: the turn is done).
func (s *Scheduler) runJob(ctx context.Context, cancel context.CancelCauseFunc, j store.Job) {
	begin := time.Now()
	if j.CancelRequested {
		cancel(errCanceled)
	}
	defer s.startHeartbeat(ctx, cancel, j.ID)()
	timeout := cmp.Or(max(j.Limits.Timeout, 0), s.cfg.DefaultTimeout)
	life := ctx
	ctx, stop := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%w after %s", errTimeout, durationText(timeout)))
	defer stop()
	s.emit(ctx, j.ID, event.State{Status: store.StatusRunning, Attempt: j.Attempts, Worker: s.cfg.WorkerID})
	s.log.Info("job started", "job_id", j.ID, "attempt", j.Attempts)
	res := s.execute(ctx, cancel, j)
	if status, _ := res.status(); status == store.StatusComplete {
		res.Outcome.git = s.handBack(life, j.ID, res.Outcome)
		if res.Outcome.git != nil {
			s.gitCheckpoint(life, j.ID, j.Steps+res.Outcome.Steps)
		}
	}
	s.finalCheckpoint(life, j, res.Outcome, res.Cause)
	defer s.ckpt.forget(j.ID)
	s.finish(context.WithoutCancel(ctx), j, res, time.Since(begin))
}

// startHeartbeat runs heartbeat under ctx's life until the returned stop
// is called, which waits for it.
func (s *Scheduler) startHeartbeat(ctx context.Context, cancel context.CancelCauseFunc, id string) (stop func()) {
	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		s.heartbeat(hbCtx, cancel, id)
	}()
	return func() {
		stopHB()
		<-hbDone
	}
}

// heartbeat extends the lease until ctx ends; it cancels the job when the
// lease is lost or a cancel was requested through another server.
func (s *Scheduler) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, id string) {
	tick(ctx, s.cfg.Heartbeat, func() bool {
		j, err := s.store.Heartbeat(ctx, id, s.cfg.WorkerID, s.cfg.Lease)
		switch {
		case errors.Is(err, store.ErrLeaseLost), errors.Is(err, store.ErrNotFound):
			cancel(errLeaseLost)
			return false
		case err != nil:
			s.log.Warn("heartbeat", "job_id", id, "err", err) // retried next tick; the lease outlives two misses
		case j.CancelRequested:
			cancel(errCanceled)
		}
		return true
	})
}

// attemptResult is how an attempt ended: the agent's Outcome, the error
// that stopped the work (Err), and Cause, why the job's context ended if
// it had when the agent returned: read before the teardown, so a job that
// completed is not reported as timed out while its sandbox was removed.
type attemptResult struct {
	Outcome Outcome
	Err     error
	Cause   error
}

// liveAttempt is an attempt whose sandbox is up, with the job's egress
// proxy (nil: no way out).
type liveAttempt struct {
	attempt
	je *jobEgress
}

// execute gives the job a sandbox on its workspace (startAttempt), runs
// the agent with a watchdog on the guest (watch), and destroys the sandbox
// (endAttempt).
func (s *Scheduler) execute(ctx context.Context, cancel context.CancelCauseFunc, j store.Job) (res attemptResult) {
	at, err := s.startAttempt(ctx, j)
	if err != nil {
		cause := context.Cause(ctx)
		if errors.Is(err, sandbox.ErrEngineUnavailable) {
			cause = fmt.Errorf("%w: %w", errEngineDown, err)
		}
		return attemptResult{Err: err, Cause: cause}
	}
	defer func() {
		if err := s.endAttempt(ctx, at); err != nil {
			res.Outcome.left = err
		}
	}()
	if err := s.ready(ctx, at); err != nil {
		return attemptResult{Err: err, Cause: context.Cause(ctx)}
	}
	return s.watch(ctx, cancel, at)
}

// startAttempt prepares the job's egress, if it has a way out, and gives
// it a sandbox on its workspace (setUp), tracked until endAttempt.
func (s *Scheduler) startAttempt(ctx context.Context, j store.Job) (*liveAttempt, error) {
	at := &liveAttempt{}
	var env map[string]string
	if s.cfg.Egress != nil {
		var err error
		if at.je, env, err = s.prepareEgress(j); err != nil {
			return nil, err
		}
	}
	var err error
	if at.attempt, err = s.setUp(ctx, j, env); err != nil {
		return nil, err
	}
	s.track(at.j.ID, at.sb)
	s.metrics.sandboxStarted(time.Since(at.begin))
	return at, nil
}

// ready records the sandbox's handle and its start in the job's log, and
// starts the job's egress proxy on it.
func (s *Scheduler) ready(ctx context.Context, at *liveAttempt) error {
	j, sb := at.j, at.sb
	if err := s.saveHandle(ctx, j.ID, sb.Handle()); err != nil {
		return err
	}
	s.emit(ctx, j.ID, event.Sandbox{SandboxID: sb.Handle().ID, ReadyMS: time.Since(at.begin).Milliseconds(), Recovered: at.recovered})
	if at.je != nil {
		return s.startEgress(ctx, j, sb, at.je)
	}
	return nil
}

// watch runs the agent with a watchdog on the guest until it returns.
func (s *Scheduler) watch(ctx context.Context, cancel context.CancelCauseFunc, at *liveAttempt) attemptResult {
	sb := at.sb
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
	out, err := s.agent.Run(ctx, s.agentRun(at))
	if why := stoppedBy(sb); why != nil {
		cancel(why)
	} else if errors.Is(err, guest.ErrUnavailable) {
		if why := exitedBy(ctx, sb); why != nil {
			cancel(why)
		}
	}
	out.ws = at.ws
	return attemptResult{Outcome: out, Err: err, Cause: context.Cause(ctx)}
}

// agentRun is the attempt as the agent sees it.
func (s *Scheduler) agentRun(at *liveAttempt) *Run {
	j, sb, ws := at.j, at.sb, at.ws
	return &Run{Job: j, Sandbox: sb, Recovered: at.recovered, Restored: at.restored,
		emit: func(ctx context.Context, p event.Payload) { s.emit(ctx, j.ID, p) },
		progress: func(ctx context.Context, p Progress) error {
			// Only under this worker's lease: one that lost it must not
			// move the job's checkpoint under its new worker.
			err := s.progress(ctx, j, p)
			if err == nil {
				s.stepCheckpoint(ctx, j, sb, ws, j.Steps+p.Steps)
			}
			return err
		},
		events: func(ctx context.Context, after int64, limit int) ([]store.Event, error) {
			return s.store.Events(ctx, j.ID, after, limit)
		},
		keep:      s.keepImage(j.ID),
		network:   at.je,
		maxOutput: s.cfg.MaxOutputEvents,
	}
}

// endAttempt stops the job's egress proxy and destroys its sandbox; the
// error is why the sandbox could not be destroyed (Outcome.left).
func (s *Scheduler) endAttempt(ctx context.Context, at *liveAttempt) error {
	at.je.stop()
	s.untrack(at.j.ID)
	if err := at.sb.Destroy(context.WithoutCancel(ctx)); err != nil {
		s.log.Error("destroy sandbox", "job_id", at.j.ID, "sandbox_id", at.sb.Handle().ID, "err", err)
		return err
	}
	return nil
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
		if why := stoppedBy(sb); why != nil {
			cancel(why)
			return
		}
		hctx, hcancel := context.WithTimeout(ctx, s.cfg.WatchdogInterval)
		_, err := sb.Guest().Health(hctx)
		hcancel()
		if err == nil || ctx.Err() != nil {
			failures = 0
			continue
		}
		// A socket that is not the guest's is tampering, not a slow guest.
		if failures++; failures >= s.cfg.WatchdogFailures || errors.Is(err, guest.ErrUnsafeSocket) {
			cancel(fmt.Errorf("%w: %w", errSandboxDied, err))
			return
		}
	}
}

// stoppedBy is why the driver stopped sb (its disk quota), or nil.
func stoppedBy(sb sandbox.Sandbox) error {
	if st, ok := sb.(sandbox.Stopper); ok {
		return st.Stopped()
	}
	return nil
}

// exitedBy is why sb ended on its own, or nil while it runs: asked when
// an attempt failed for want of the guest, so that the job says the
// sandbox died rather than only that the guest's stream ended.
func exitedBy(ctx context.Context, sb sandbox.Sandbox) error {
	e, ok := sb.(sandbox.Exiter)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return e.Exited(ctx)
}

// finish records how the attempt ended, unless the job was handed back
// (shutdown) or taken over (lease lost).
func (s *Scheduler) finish(ctx context.Context, j store.Job, res attemptResult, took time.Duration) {
	log := s.log.With("job_id", j.ID)
	switch cause := res.Cause; {
	case errors.Is(cause, errShutdown):
		s.release(ctx, j.ID, "server shut down before the job ended; it will run again")
		return
	case errors.Is(cause, errEngineDown):
		log.Error("container engine unavailable; job handed back, claims paused", "err", res.Err, "pause", engineBackoff)
		s.pause(engineBackoff)
		s.release(ctx, j.ID, "the container engine was unavailable; the job will run again")
		return
	case errors.Is(cause, errLeaseLost):
		log.Warn("lease lost; another worker owns the job now")
		return
	}
	status, msg := res.status()
	out := res.Outcome
	j2, err := s.record(ctx, j, status, msg, out)
	if errors.Is(err, store.ErrLeaseLost) {
		log.Warn("lease lost before the outcome was recorded; another worker owns the job now")
		return
	}
	if err != nil {
		// The outcome could not be written: hand the job back rather than
		// leave it running without a heartbeat.
		log.Error("record job end", "err", err)
		s.release(ctx, j.ID, "its outcome could not be recorded; it will run again")
		return
	}
	s.feed.notify(j.ID)
	s.metrics.jobEnded(status, took)
	log.Info("job ended", "status", status, "error", msg, "steps", j2.Steps, "turn", j2.Turn, "took", durationText(took))
	if out.Seen > 0 && status != store.StatusCanceled {
		s.lateMessages(ctx, j2, out.Seen)
	}
}

// record writes the outcome, with its final state event in the same
// write (so a reply or a follower never sees the end without it), retrying
// a failing store with backoff for about 30s; ErrLeaseLost is final.
func (s *Scheduler) record(ctx context.Context, j store.Job, status store.Status, msg string, out Outcome) (store.Job, error) {
	delay := 100 * time.Millisecond
	for try := 0; ; try++ {
		j2, _, err := s.store.UpdateJobLogged(ctx, j.ID, func(x *store.Job) ([]store.Entry, error) {
			if !holds(x, j, s.cfg.WorkerID) {
				return nil, store.ErrLeaseLost
			}
			x.Status, x.Error, x.Result, x.EndedAt = status, msg, out.Result, time.Now().UTC()
			applyGit(&x.Git, out.git)
			// Totals are the job's as claimed plus this attempt's, so progress
			// reported along the way is not counted twice.
			x.Steps = j.Steps + out.Steps
			x.Usage = addUsage(j.Usage, out.Usage)
			x.LeaseOwner, x.LeaseUntil = "", time.Time{}
			return entries(event.State{Status: status, Error: msg})
		})
		if err == nil || errors.Is(err, store.ErrLeaseLost) || try >= 8 {
			return j2, err
		}
		s.log.Warn("record job end: retrying", "job_id", j.ID, "err", err)
		time.Sleep(delay) // backing off a failing store; nothing to await
		delay = min(2*delay, 5*time.Second)
	}
}

// progress records an attempt's totals so far, under this worker's lease.
func (s *Scheduler) progress(ctx context.Context, j store.Job, p Progress) error {
	_, err := s.store.UpdateJob(ctx, j.ID, func(x *store.Job) error {
		if !holds(x, j, s.cfg.WorkerID) {
			return store.ErrLeaseLost
		}
		x.Steps, x.Usage, x.ContextTokens = j.Steps+p.Steps, addUsage(j.Usage, p.Usage), p.ContextTokens
		return nil
	})
	if err != nil {
		return fmt.Errorf("record progress: %w", err)
	}
	return nil
}

// holds reports whether worker still runs the attempt at job j it
// claimed (attempts count from 1 in each turn).
func holds(x *store.Job, j store.Job, worker string) bool {
	return x.LeaseOwner == worker && x.Status == store.StatusRunning && x.Attempts == j.Attempts && x.Turn == j.Turn
}

// release hands a job back to pending (or canceled, if that was asked).
func (s *Scheduler) release(ctx context.Context, id, reason string) {
	if err := s.store.Release(ctx, id, s.cfg.WorkerID); err != nil {
		s.log.Error("release job", "job_id", id, "err", err)
		return
	}
	j, err := s.store.GetJob(ctx, id)
	if err != nil {
		return
	}
	s.emit(ctx, id, event.State{Status: j.Status, Reason: reason})
	s.log.Info("job released", "job_id", id, "status", j.Status, "reason", reason)
}

// status decides a job's final status: what stopped it first wins.
func (r attemptResult) status() (store.Status, string) {
	out, runErr, cause := r.Outcome, r.Err, r.Cause
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

// WebBase is the URL path under which the API serves a job's sandbox web
// services (/v1/jobs/{id}/desktop/ and /v1/jobs/{id}/jupyter/): the guest
// builds the Jupyter and noVNC pages' links from it.
func WebBase(jobID string) string { return "/v1/jobs/" + jobID }

// keepImage keeps job id's images in the scheduler's Media, if any.
func (s *Scheduler) keepImage(id string) func(step int, data []byte) string {
	if s.cfg.Media == nil {
		return nil
	}
	return func(step int, data []byte) string {
		name, err := s.cfg.Media.Save(id, step, data)
		if err != nil {
			s.log.Error("keep a tool result's image", "job_id", id, "err", err)
		}
		return name
	}
}
