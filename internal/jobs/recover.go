package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/store"
)

// reclaim puts jobs whose worker died (lease expired, or, with own set, this
// worker's previous life) back to pending or ends them, destroys their stale
// sandboxes, and removes this worker's orphaned sandboxes.
func (s *Scheduler) reclaim(ctx context.Context, own string) {
	if ctx.Err() != nil {
		return
	}
	// A job going back to pending keeps its sandbox for the next attempt.
	if jobs := requeueDead(ctx, s.feed, s.log, own, s.destroyStale); len(jobs) > 0 {
		s.feed.wake()
	}
	s.reapOrphans(ctx)
}

// requeueDead puts jobs whose worker died (lease expired, or, with own
// set, the previous life of worker own) back to pending or ends them, says
// why in their logs, and returns them; ended is given each that ended.
func requeueDead(ctx context.Context, f *Feed, log *slog.Logger, own string, ended func(context.Context, store.Job)) []store.Job {
	jobs, err := f.store.RequeueExpired(ctx, time.Now(), own)
	if err != nil {
		log.Error("requeue expired jobs", "err", err)
	}
	for _, j := range jobs {
		now, err := f.store.GetJob(ctx, j.ID)
		if err != nil {
			continue
		}
		if now.Status.Final() && ended != nil {
			ended(ctx, j)
		}
		const why = "the worker running it stopped (lease expired)"
		var p event.Payload = event.State{Status: now.Status, Error: now.Error, Reason: why}
		if now.Status == store.StatusRunning {
			// Another worker claimed it since it was requeued, and said so
			// in its own state event: a state event now would come after
			// that one, so the reason goes in a log line.
			p = event.Log{Level: "warn", Message: fmt.Sprintf("attempt %d ended: %s; the job was requeued", j.Attempts, why)}
		}
		if err := f.emit(ctx, j.ID, p); err != nil {
			log.Error("append event", "job_id", j.ID, "type", p.EventType(), "err", err)
		}
		log.Warn("job recovered from a dead worker", "job_id", j.ID, "status", now.Status, "attempts", j.Attempts)
	}
	return jobs
}

// reapInterval is how often expired leases are looked for by default:
// the lease, at most a minute.
func reapInterval(lease time.Duration) time.Duration { return min(lease, time.Minute) }

// Reaper requeues the jobs of workers that died, on a node that runs no
// Scheduler (an API replica): a Scheduler does it for itself.
type Reaper struct {
	feed  *Feed
	every time.Duration
	log   *slog.Logger
}

// ReaperConfig is what a Reaper is made of.
type ReaperConfig struct {
	// Feed is the process's live feed, over the store the jobs are in.
	Feed *Feed
	// Lease is the workers' lease (0: DefaultLease): expired leases are
	// looked for every lease, at most every minute, and Metrics, if set,
	// judges registered workers alive by it.
	Lease   time.Duration
	Metrics *Metrics
	Log     *slog.Logger
}

// NewReaper returns the reaper cfg describes; Run starts it.
func NewReaper(cfg ReaperConfig) *Reaper {
	lease := cmp.Or(cfg.Lease, DefaultLease)
	cfg.Metrics.setLease(lease)
	return &Reaper{feed: cfg.Feed, every: reapInterval(lease), log: cmp.Or(cfg.Log, slog.New(slog.DiscardHandler))}
}

// Run requeues the jobs of dead workers until ctx ends.
func (r *Reaper) Run(ctx context.Context) {
	tick(ctx, r.every, func() bool {
		if jobs := requeueDead(ctx, r.feed, r.log, "", nil); len(jobs) > 0 {
			r.feed.wake()
		}
		return true
	})
}

func (s *Scheduler) destroyStale(ctx context.Context, j store.Job) {
	if len(j.Sandbox) == 0 || s.driver == nil {
		return
	}
	var h sandbox.Handle
	if err := json.Unmarshal(j.Sandbox, &h); err != nil {
		s.log.Error("stale sandbox handle", "job_id", j.ID, "err", err)
		return
	}
	if err := s.driver.Remove(ctx, h); err != nil {
		s.log.Error("destroy stale sandbox", "job_id", j.ID, "sandbox_id", h.ID, "err", err)
	}
}

// reapOrphans destroys the sandboxes this worker made whose job is no
// longer running; without a driver (an API replica) there are none.
// Sandboxes of other servers and of agentbox exec are never touched.
func (s *Scheduler) reapOrphans(ctx context.Context) {
	if s.driver == nil {
		return // an API replica: it makes no sandboxes
	}
	hs, err := s.driver.List(ctx)
	if err != nil {
		s.log.Error("list sandboxes", "err", err)
		return
	}
	for _, l := range hs {
		h := l.Handle
		if h.Owner != s.cfg.WorkerID || s.isRunning(h.JobID) || s.live(ctx, h) {
			continue
		}
		if err := s.driver.Remove(ctx, h); err != nil {
			s.log.Error("remove orphaned sandbox", "sandbox_id", h.ID, "job_id", h.JobID, "err", err)
			continue
		}
		s.log.Info("removed orphaned sandbox", "sandbox_id", h.ID, "job_id", h.JobID)
	}
}

// live reports whether the sandbox is still wanted: its job runs under a
// live lease (the sandbox may be starting, or left from an earlier attempt),
// or waits to resume in it.
func (s *Scheduler) live(ctx context.Context, h sandbox.Handle) bool {
	j, err := s.store.GetJob(ctx, h.JobID)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	if err != nil {
		return true // unsure: keep it, the next pass decides
	}
	if j.Status == store.StatusPending {
		var saved sandbox.Handle
		return json.Unmarshal(j.Sandbox, &saved) == nil && saved.ID == h.ID
	}
	return j.Status == store.StatusRunning && time.Now().Before(j.LeaseUntil)
}
