package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/store"
)

// recover puts jobs whose worker died (lease expired, or this worker's
// previous life) back to pending or ends them after their last attempt,
// destroys their stale sandboxes, and removes orphaned sandboxes: those of
// this installation whose job is not running in them.
func (s *Scheduler) recover(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	jobs, err := s.store.RequeueExpired(ctx, time.Now(), s.cfg.WorkerID)
	if err != nil {
		s.log.Error("requeue expired jobs", "err", err)
	}
	for _, j := range jobs {
		s.destroyStale(ctx, j)
		now, err := s.store.GetJob(ctx, j.ID)
		if err != nil {
			continue
		}
		ev := map[string]any{"status": now.Status, "reason": "the worker running it stopped (lease expired)"}
		if now.Error != "" {
			ev["error"] = now.Error
		}
		s.emit(ctx, j.ID, EventState, ev)
		s.log.Warn("job recovered from a dead worker", "job_id", j.ID, "status", now.Status, "attempts", j.Attempts)
	}
	if len(jobs) > 0 {
		s.wake()
	}
	s.reapOrphans(ctx)
}

func (s *Scheduler) destroyStale(ctx context.Context, j store.Job) {
	if len(j.Sandbox) == 0 {
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

// reapOrphans destroys sandboxes no running job owns.
func (s *Scheduler) reapOrphans(ctx context.Context) {
	hs, err := s.driver.List(ctx)
	if err != nil {
		s.log.Error("list sandboxes", "err", err)
		return
	}
	for _, h := range hs {
		if s.isRunning(h.JobID) || s.owned(ctx, h) {
			continue
		}
		if err := s.driver.Remove(ctx, h); err != nil {
			s.log.Error("remove orphaned sandbox", "sandbox_id", h.ID, "job_id", h.JobID, "err", err)
			continue
		}
		s.log.Info("removed orphaned sandbox", "sandbox_id", h.ID, "job_id", h.JobID)
	}
}

// owned reports whether h is the current sandbox of a job that is running
// under a live lease (possibly on another server).
func (s *Scheduler) owned(ctx context.Context, h sandbox.Handle) bool {
	j, err := s.store.GetJob(ctx, h.JobID)
	if errors.Is(err, store.ErrNotFound) || err == nil && j.Status != store.StatusRunning {
		return false
	}
	if err != nil {
		return true // unsure: keep it, the next pass decides
	}
	var cur sandbox.Handle
	if json.Unmarshal(j.Sandbox, &cur) != nil {
		// Running but no handle saved yet: the sandbox may be starting.
		return j.LeaseOwner != s.cfg.WorkerID && time.Now().Before(j.LeaseUntil)
	}
	return cur.ID == h.ID && time.Now().Before(j.LeaseUntil)
}
