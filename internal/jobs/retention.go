package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

// JanitorConfig configures the retention janitor.
type JanitorConfig struct {
	// Retention is how long an ended job's data is kept after EndedAt;
	// 0 keeps it for ever.
	Retention time.Duration
	// Interval is the time between sweeps. Default: an hour, or half the
	// retention when that is shorter (at least a second).
	Interval time.Duration
	Log      *slog.Logger
	// Now is the janitor's clock; nil means time.Now. Tests set it.
	Now func() time.Time
}

func (c JanitorConfig) withDefaults() JanitorConfig {
	if c.Interval <= 0 {
		c.Interval = time.Hour
		if c.Retention > 0 {
			c.Interval = max(time.Second, min(c.Interval, c.Retention/2))
		}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Janitor removes the data of jobs that ended more than the retention ago
// and marks them deleted (reason "retention"); pending and running jobs
// are never touched. A sweep costs an indexed query that returns only the
// jobs due, so it runs at start and then every Interval.
type Janitor struct {
	svc *Service
	cfg JanitorConfig

	mu      sync.Mutex      // one sweep at a time
	scanned bool            // the first sweep's look for leftovers is done
	retry   map[string]bool // marked deleted, data not removed yet

	cancel context.CancelCauseFunc
	done   chan struct{}
}

// Batch sizes of a sweep, and how many failed removals are retried.
const (
	janitorBatch    = 100
	janitorMaxRetry = 1000
)

// errJanitorClosed is why a janitor's context ends on Close.
var errJanitorClosed = errors.New("janitor closed")

// NewJanitor returns a janitor over svc's store and data dir. Start runs
// it; Sweep runs one pass.
func NewJanitor(svc *Service, cfg JanitorConfig) *Janitor {
	return &Janitor{svc: svc, cfg: cfg.withDefaults(), retry: map[string]bool{}}
}

// Start sweeps at once and then every Interval, in a goroutine that lives
// until ctx ends or Close.
func (j *Janitor) Start(ctx context.Context) {
	ctx, j.cancel = context.WithCancelCause(ctx)
	j.done = make(chan struct{})
	go func() {
		defer close(j.done)
		j.run(ctx)
	}()
}

// Close stops a started janitor and waits for a sweep under way to end.
func (j *Janitor) Close() {
	if j.cancel == nil {
		return
	}
	j.cancel(errJanitorClosed)
	<-j.done
}

func (j *Janitor) run(ctx context.Context) {
	t := time.NewTicker(j.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := j.Sweep(ctx); err != nil && ctx.Err() == nil {
			j.cfg.Log.Error("retention sweep", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep removes the data of the jobs past the retention and returns how
// many it removed. The first sweep also finishes the removals a crash
// interrupted (jobs marked deleted whose workspace is still there); later
// ones retry removals that failed.
func (j *Janitor) Sweep(ctx context.Context) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.scanned {
		if err := j.leftovers(ctx); err != nil && ctx.Err() == nil {
			j.cfg.Log.Error("retention: look for leftovers of deleted jobs", "err", err)
		}
		if ctx.Err() != nil {
			return 0, context.Cause(ctx)
		}
		j.scanned = true
	}
	j.retryFailed(ctx)
	if j.cfg.Retention <= 0 {
		return 0, nil
	}
	cut := j.cfg.Now().Add(-j.cfg.Retention)
	n := 0
	for {
		due, err := j.svc.store.EndedBefore(ctx, cut, janitorBatch)
		if err != nil {
			return n, fmt.Errorf("retention: %w", err)
		}
		removed, err := j.expire(ctx, due)
		n += removed
		if err != nil || len(due) < janitorBatch {
			return n, err
		}
	}
}

// expire deletes the data of jobs due. A failed removal is logged and
// retried next sweep; a job it could not mark deleted stops the sweep, as
// the next query would return it again, unless it was continued since.
func (j *Janitor) expire(ctx context.Context, due []store.Job) (int, error) {
	n := 0
	for _, job := range due {
		if err := context.Cause(ctx); ctx.Err() != nil {
			return n, err
		}
		got, err := j.svc.deleteData(ctx, job.ID, DeletedByRetention)
		switch {
		case errors.Is(err, ErrNotEnded):
			// A follow-up message started the job's next turn since the
			// query: its data is in use again.
			j.cfg.Log.Info("retention: job continued, its data is kept", "job_id", job.ID)
		case err != nil && got.DeletedAt.IsZero():
			return n, fmt.Errorf("retention: %w", err)
		case err != nil:
			j.failed(job.ID, err)
		default:
			n++
			j.cfg.Log.Info("removed the data of an expired job", "job_id", job.ID, "ended_at", job.EndedAt)
		}
	}
	return n, nil
}

func (j *Janitor) failed(id string, err error) {
	j.cfg.Log.Error("retention: remove job data (retried next sweep)", "job_id", id, "err", err)
	if len(j.retry) < janitorMaxRetry {
		j.retry[id] = true
	}
}

// retryFailed tries again the removals that failed in earlier sweeps.
func (j *Janitor) retryFailed(ctx context.Context) {
	for id := range j.retry {
		if ctx.Err() != nil {
			return
		}
		err := j.svc.removeData(ctx, id)
		if err == nil {
			delete(j.retry, id)
			continue
		}
		j.cfg.Log.Warn("retention: remove job data, again", "job_id", id, "err", err)
	}
}

// leftovers removes the workspaces and git dirs of jobs marked deleted: a
// removal that a crash interrupted, or that failed. Entries of no job, or
// of a job not deleted, are left alone.
func (j *Janitor) leftovers(ctx context.Context) error {
	ids, err := j.svc.ws.List(ctx)
	if err != nil {
		return err
	}
	if j.svc.repos != nil {
		more, err := j.svc.repos.list()
		if err != nil {
			return err
		}
		ids = append(ids, more...)
		slices.Sort(ids)
		ids = slices.Compact(ids)
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		job, err := j.svc.store.GetJob(ctx, id)
		if err != nil || job.DeletedAt.IsZero() {
			continue // no such job (not ours to judge), a live one, or the store failed: next start
		}
		if err := j.svc.removeData(ctx, id); err != nil {
			j.failed(id, err)
			continue
		}
		j.cfg.Log.Info("removed the leftover data of a deleted job", "job_id", id)
	}
	return nil
}
