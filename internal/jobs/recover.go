package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	jobs, err := s.store.RequeueExpired(ctx, time.Now(), own)
	if err != nil {
		s.log.Error("requeue expired jobs", "err", err)
	}
	for _, j := range jobs {
		now, err := s.store.GetJob(ctx, j.ID)
		if err != nil {
			continue
		}
		if now.Status.Final() {
			s.destroyStale(ctx, j) // a job going back to pending keeps its sandbox for the next attempt
		}
		const why = "the worker running it stopped (lease expired)"
		if now.Status == store.StatusRunning {
			// Another worker claimed it since it was requeued, and said so
			// in its own state event: a state event now would come after
			// that one, so the reason goes in a log line.
			s.emit(ctx, j.ID, event.Log{Level: "warn", Message: fmt.Sprintf("attempt %d ended: %s; the job was requeued", j.Attempts, why)})
		} else {
			s.emit(ctx, j.ID, event.State{Status: now.Status, Error: now.Error, Reason: why})
		}
		s.log.Warn("job recovered from a dead worker", "job_id", j.ID, "status", now.Status, "attempts", j.Attempts)
	}
	if len(jobs) > 0 {
		s.wake()
	}
	s.reapOrphans(ctx)
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
