package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/store"
)

// attempt is what an attempt at a job runs on: the job as its start
// recorded it, its workspace, its sandbox.
type attempt struct {
	j  store.Job
	ws string
	sb sandbox.Sandbox
	// recovered: sb outlived an earlier attempt; restored: ws was
	// replaced by a checkpoint (the job ran elsewhere since).
	recovered bool
	restored  *Restored
	begin     time.Time // when the sandbox began to be made ready
}

// setUp prepares the job's workspace and gives it a sandbox: the one an
// earlier attempt left running, or else a new one, made once the
// workspace is restored from the job's checkpoint if it ran elsewhere
// since and its start is recorded (startFrom).
func (s *Scheduler) setUp(ctx context.Context, j store.Job, env map[string]string) (attempt, error) {
	ws, err := s.cfg.Workspaces.Prepare(ctx, j.ID)
	if err != nil {
		return attempt{}, err
	}
	at := attempt{ws: ws, begin: time.Now()}
	at.sb = s.recoverSandbox(ctx, j)
	at.recovered = at.sb != nil
	if !at.recovered {
		if at.restored, err = s.restore(ctx, j, ws); err != nil {
			return attempt{}, err
		}
	}
	// A recovered sandbox means the job started before: startFrom leaves it.
	based := j.Git.BaseCommit != ""
	if at.j, err = s.startFrom(ctx, j, ws); err != nil {
		return attempt{}, err
	}
	if !based && at.j.Git.BaseCommit != "" {
		s.gitCheckpoint(ctx, j.ID, j.Steps)
	}
	if !at.recovered {
		img, err := s.sandboxImage(ctx, at.j)
		if err != nil {
			return attempt{}, fmt.Errorf("start sandbox: %w", err)
		}
		at.begin = time.Now()
		if at.sb, err = s.createSandbox(ctx, at.j, img, ws, env); err != nil {
			return attempt{}, fmt.Errorf("start sandbox: %w", err)
		}
	}
	return at, nil
}

// recoverSandbox reattaches to the sandbox an earlier attempt of this
// worker left running (a restart), or removes what is left of it and
// returns nil.
func (s *Scheduler) recoverSandbox(ctx context.Context, j store.Job) sandbox.Sandbox {
	var h sandbox.Handle
	if len(j.Sandbox) == 0 || json.Unmarshal(j.Sandbox, &h) != nil || h.ID == "" {
		return nil
	}
	if h.Owner != "" && h.Owner != s.cfg.WorkerID {
		// Another worker's, lost: on another host its engine is out of
		// reach, and on this one its workspace is that worker's, not the
		// job's checkpoint. That worker removes it when it comes back.
		return nil
	}
	if sb, err := s.driver.Recover(ctx, h); err == nil {
		return sb
	}
	if err := s.driver.Remove(ctx, h); err != nil {
		s.log.Warn("remove stale sandbox", "job_id", j.ID, "sandbox_id", h.ID, "err", err)
	}
	return nil
}

// Images picks a new sandbox's image: ref is the job's ("" for the
// sandbox image); desktop says whether its agent may use the desktop or
// notebook. While it waits for an image it tells the job with say.
type Images interface {
	Image(ctx context.Context, ref string, desktop bool, say func(msg string)) (string, error)
}

// sandboxImage is the image of the job's new sandbox: the job's, or what
// cfg.Images picks while the desktop layer builds, the wait in the job's
// log.
func (s *Scheduler) sandboxImage(ctx context.Context, j store.Job) (string, error) {
	if s.cfg.Images == nil {
		return j.Image, nil
	}
	da, ok := s.agent.(DesktopAgent)
	desktop := ok && da.UsesDesktop()
	return s.cfg.Images.Image(ctx, j.Image, desktop, func(msg string) {
		s.emit(ctx, j.ID, event.Log{Level: "info", Message: msg})
	})
}

// createSandbox creates a new sandbox of image img on the job's
// workspace, with env in every command's environment.
func (s *Scheduler) createSandbox(ctx context.Context, j store.Job, img, ws string, env map[string]string) (sandbox.Sandbox, error) {
	return sandbox.Start(ctx, s.driver, sandbox.Spec{Owner: s.cfg.WorkerID, Image: img, Isolation: j.Isolation,
		Limits: sandbox.Limits{MemoryBytes: j.Limits.MemoryBytes, NanoCPUs: j.Limits.NanoCPUs, DiskBytes: j.Limits.DiskBytes}},
		sandbox.Binding{JobID: j.ID, WorkspaceDir: ws, ManagedWorkspace: true, Env: env, WebBase: WebBase(j.ID)})
}
