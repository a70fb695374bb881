package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/store"
)

// ErrNoSandbox means a job has no running sandbox to reach: it is pending,
// has ended, or its sandbox is gone or runs where this server cannot reach.
var ErrNoSandbox = errors.New("job has no running sandbox")

// maxRecovered bounds the guest clients kept for sandboxes this server
// reattached to without running their jobs.
const maxRecovered = 64

// Guest returns the client of the guest in a running job's sandbox, for
// the API's desktop and Jupyter proxy. A job this server runs gives its
// worker's own client; another's sandbox (an API-only node sharing the
// engine) is reattached to from the job's saved handle, once, and the
// client is dropped when the job is seen to have ended. Never Destroy
// what this returns: the job's worker owns the sandbox.
//
// A job that is running but whose sandbox is still starting (a viewer link
// opened right after the submit) is waited for, up to SandboxStartWait or
// until ctx ends; a pending job is not: it may queue for long.
//
// Errors: store.ErrNotFound for an unknown job, ErrNoSandbox when there is
// no running sandbox to reach.
func (s *Service) Guest(ctx context.Context, id string) (*guest.Client, error) {
	giveUp := time.NewTimer(SandboxStartWait)
	defer giveUp.Stop()
	starting := fmt.Errorf("%w: job %s is running but its sandbox is still starting", ErrNoSandbox, id)
	for waited := false; ; waited = true {
		g, err := s.guest(ctx, id)
		switch {
		case waited && err != nil && ctx.Err() != nil:
			return nil, starting // the caller left while the store was asked again
		case !errors.Is(err, errStarting):
			return g, err
		}
		select {
		case <-time.After(sandboxPoll):
		case <-giveUp.C:
			return nil, fmt.Errorf("%w: job %s is running but its sandbox did not start within %v", ErrNoSandbox, id, SandboxStartWait)
		case <-ctx.Done():
			return nil, starting
		}
	}
}

// SandboxStartWait bounds how long Guest waits for a running job's
// sandbox to start; sandboxPoll is how often it looks.
const (
	SandboxStartWait = 30 * time.Second
	sandboxPoll      = 100 * time.Millisecond
)

// errStarting: the job runs, but its sandbox has not started yet.
var errStarting = errors.New("sandbox starting")

func (s *Service) guest(ctx context.Context, id string) (*guest.Client, error) {
	if s.sched != nil {
		if sb := s.sched.liveSandbox(id); sb != nil {
			return sb.Guest(), nil
		}
	}
	j, err := s.store.GetJob(ctx, id)
	if err != nil {
		return nil, err
	}
	switch {
	case j.Status == store.StatusPending:
		return nil, fmt.Errorf("%w: job %s is pending; its sandbox starts when a worker takes it", ErrNoSandbox, id)
	case j.Status != store.StatusRunning:
		s.recovered.drop(id)
		return nil, fmt.Errorf("%w: job %s is %s and its sandbox was removed", ErrNoSandbox, id, j.Status)
	case s.sched == nil || s.sched.driver == nil:
		return nil, fmt.Errorf("%w: job %s runs on another server; this one has no sandbox driver", ErrNoSandbox, id)
	}
	var h sandbox.Handle
	if len(j.Sandbox) == 0 || json.Unmarshal(j.Sandbox, &h) != nil || h.ID == "" {
		return nil, errStarting
	}
	return s.recovered.get(ctx, s.sched.driver, id, h)
}

// recoveredGuests caches the sandboxes Service.Guest reattached to, by job.
type recoveredGuests struct {
	mu  sync.Mutex
	sbs map[string]sandbox.Sandbox
}

func (c *recoveredGuests) get(ctx context.Context, d sandbox.Driver, id string, h sandbox.Handle) (*guest.Client, error) {
	c.mu.Lock()
	sb, ok := c.sbs[id]
	c.mu.Unlock()
	if ok && sb.Handle().ID == h.ID {
		return sb.Guest(), nil
	}
	c.drop(id) // an earlier attempt's sandbox
	sb, err := d.Recover(ctx, h)
	if errors.Is(err, sandbox.ErrGone) {
		return nil, fmt.Errorf("%w: job %s's sandbox %s is gone: %w", ErrNoSandbox, id, h.ID, err)
	}
	if err != nil {
		return nil, fmt.Errorf("reach sandbox of job %s: %w", id, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.sbs[id]; ok && old.Handle().ID == h.ID {
		sb.Guest().Close() // another request won the race
		return old.Guest(), nil
	}
	if c.sbs == nil {
		c.sbs = map[string]sandbox.Sandbox{}
	}
	for k, old := range c.sbs {
		if len(c.sbs) < maxRecovered {
			break
		}
		old.Guest().Close()
		delete(c.sbs, k)
	}
	c.sbs[id] = sb
	return sb.Guest(), nil
}

// drop forgets a job's sandbox and closes its client's idle connections.
// The sandbox itself is its worker's to destroy.
func (c *recoveredGuests) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sb, ok := c.sbs[id]; ok {
		sb.Guest().Close()
		delete(c.sbs, id)
	}
}

// track records the sandbox a job of this worker runs in, for Service.Guest;
// untrack forgets it before the sandbox is destroyed.
func (s *Scheduler) track(id string, sb sandbox.Sandbox) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sandboxes[id] = sb
}

func (s *Scheduler) untrack(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sandboxes, id)
}

func (s *Scheduler) liveSandbox(id string) sandbox.Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sandboxes[id]
}
