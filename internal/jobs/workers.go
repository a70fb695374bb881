package jobs

import (
	"context"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

// WorkerHeartbeat is how often a worker refreshes its entry in the
// store's worker registry unless SchedulerConfig.Register says otherwise.
const WorkerHeartbeat = 5 * time.Second

// WorkerAlive reports whether w's last heartbeat is recent at now: within
// three heartbeat intervals or the lease, whichever is longer.
func WorkerAlive(w store.Worker, lease time.Duration, now time.Time) bool {
	return now.Sub(w.HeartbeatAt) <= max(3*WorkerHeartbeat, lease)
}

// WorkerStatus is a registered worker and whether it is alive.
type WorkerStatus struct {
	store.Worker
	Alive bool
}

// Workers lists the registered workers, each with whether it is alive.
func (s *Service) Workers(ctx context.Context) ([]WorkerStatus, error) {
	ws, err := s.store.Workers(ctx)
	if err != nil {
		return nil, err
	}
	lease, now := s.lease, time.Now()
	out := make([]WorkerStatus, 0, len(ws))
	for _, w := range ws {
		out = append(out, WorkerStatus{Worker: w, Alive: WorkerAlive(w, lease, now)})
	}
	return out, nil
}

// QueuePosition is a pending job's place in the queue (1: next), 0 for a
// job not pending.
func (s *Service) QueuePosition(ctx context.Context, id string) (int, error) {
	return s.store.QueuePosition(ctx, id)
}

// Running is how many jobs this scheduler runs now.
func (s *Scheduler) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.running)
}

// startRegistry registers this worker in the store, refreshes its entry
// every heartbeat until ctx ends, then removes it (a clean stop). The
// returned channel closes when it is done. A scheduler that runs no jobs
// registers nothing.
func (s *Scheduler) startRegistry(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if s.cfg.Concurrency < 1 {
		close(done)
		return done
	}
	started := time.Now()
	go func() {
		defer close(done)
		t := time.NewTicker(s.cfg.Register)
		defer t.Stop()
		for {
			s.putWorker(ctx, started)
			select {
			case <-ctx.Done():
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				if err := s.store.RemoveWorker(rctx, s.cfg.WorkerID); err != nil {
					s.log.Error("remove this worker from the registry", "err", err)
				}
				return
			case <-t.C:
			}
		}
	}()
	return done
}

// putWorker writes this worker's registry entry.
func (s *Scheduler) putWorker(ctx context.Context, started time.Time) {
	w := store.Worker{ID: s.cfg.WorkerID, Address: s.cfg.Address, Capacity: s.cfg.Concurrency,
		Running: s.Running(), StartedAt: started, HeartbeatAt: time.Now()}
	if err := s.store.PutWorker(ctx, w); err != nil && ctx.Err() == nil {
		s.log.Error("register this worker", "err", err)
	}
}

// Capacity is how many jobs this scheduler runs at once.
func (s *Scheduler) Capacity() int { return s.cfg.Concurrency }
