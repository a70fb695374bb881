package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/loopdisk"
)

// Late binding (sandbox.Binder). A sandbox made with no Binding runs its
// guest on a scratch workspace held on a loop disk of its quota's size,
// mounted at /workspace. Bind copies the job's workspace onto that disk (the
// quota holds: what does not fit fails the bind), makes the job's directory
// the home the disk's content goes back to at Destroy (as for a managed
// workspace given at create), tells the guest the job's environment and web
// base (POST /bind), and writes the job to bound.json in the state dir:
// container labels cannot change, so List reads the binding there.
//
// Only where a scratch workspace gets a loop disk (root, loop devices, no
// XFS project quota on the state dir, no forced watchdog) can a workspace
// come late; elsewhere Capabilities.Bind is false and sandbox.Start gives
// the binding to Create.

var _ sandbox.Binder = (*Sandbox)(nil)

// boundFile is the binding of a late-bound sandbox, in its state dir.
const boundFile = "bound.json"

// bound is what bound.json holds.
type bound struct {
	JobID          string `json:"job_id"`
	WorkspaceDir   string `json:"workspace_dir,omitempty"`
	WorkspaceOwner string `json:"workspace_owner,omitempty"`
}

// bindsLate says whether this driver's sandboxes can take a workspace after
// they were made: their scratch workspace is a loop disk.
func (d *Driver) bindsLate() bool {
	d.lateOnce.Do(func() {
		d.late = isRoot() && d.quotaMode(d.cfg.StateDir, true) == QuotaLoop
	})
	return d.late
}

// lateState is bindsLate's answer, asked once per driver, and the
// sandboxes this driver made unbound and has not bound yet (by ID): List
// leaves them out, as no reaper may take them for orphans (a Start or a
// pool holds them; their labels name no job).
type lateState struct {
	lateOnce sync.Once
	late     bool
	unbound  sync.Map
}

// Bind binds an unbound sandbox to its job: see the comment above.
func (s *Sandbox) Bind(ctx context.Context, b sandbox.Binding) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bound {
		return fmt.Errorf("%w: sandbox %s is bound already", sandbox.ErrInvalidSpec, s.h.ID)
	}
	if err := sandbox.CheckBinding(b, true); err != nil {
		return err
	}
	if b.WorkspaceDir != "" {
		if err := s.bindWorkspace(b.WorkspaceDir); err != nil {
			return err
		}
	}
	// Always told, even of nothing: a guest left unbound would take a
	// binding from any process in the sandbox (its socket is open to them).
	if err := s.g.Bind(ctx, guest.BindRequest{Env: b.Env, WebBase: b.WebBase}); err != nil {
		return fmt.Errorf("bind sandbox %s: %w", s.h.ID, err)
	}
	s.h.JobID = b.JobID
	if err := writeBound(s.h); err != nil {
		return err
	}
	s.bound = true
	s.d.unbound.Delete(s.h.ID) // after writeBound: List then reads the job
	return nil
}

// bindWorkspace copies dir onto the sandbox's loop disk and makes dir the
// home its content returns to.
func (s *Sandbox) bindWorkspace(dir string) error {
	if !loopdisk.Has(s.h.StateDir) {
		return fmt.Errorf("%w: sandbox %s has no workspace disk to take a workspace late", sandbox.ErrInvalidSpec, s.h.ID)
	}
	if err := s.d.checkFree(dir); err != nil {
		return err
	}
	o, err := ownerOf(dir)
	if err != nil {
		return fmt.Errorf("workspace owner: %w", err)
	}
	if err := loopdisk.Fill(s.h.StateDir, dir, s.h.UID, s.h.UID); err != nil {
		return fmt.Errorf("bind sandbox %s: %w", s.h.ID, err)
	}
	// The scratch directory stays in the state dir, which Destroy removes.
	s.h.WorkspaceDir, s.h.OwnsWorkspace, s.h.WorkspaceOwner = dir, false, fmt.Sprintf("%d:%d", o.uid, o.gid)
	return nil
}

// writeBound records h's binding in its state dir, for List.
func writeBound(h record) error {
	rec := bound{JobID: h.JobID}
	if !h.OwnsWorkspace {
		rec.WorkspaceDir, rec.WorkspaceOwner = h.WorkspaceDir, h.WorkspaceOwner
	}
	b, err := json.Marshal(rec)
	if err == nil {
		err = os.WriteFile(filepath.Join(h.StateDir, boundFile), b, 0o600)
	}
	if err != nil {
		return fmt.Errorf("bind sandbox %s: %w", h.ID, err)
	}
	return nil
}

// withBound is r, as its labels give it, with the binding a late Bind
// recorded, if any.
func withBound(r record) record {
	if r.StateDir == "" {
		return r
	}
	b, err := os.ReadFile(filepath.Join(r.StateDir, boundFile))
	var rec bound
	if err != nil || json.Unmarshal(b, &rec) != nil {
		return r // never bound late (or its state dir is gone)
	}
	r.JobID = rec.JobID
	if rec.WorkspaceDir != "" {
		r.WorkspaceDir, r.OwnsWorkspace, r.WorkspaceOwner = rec.WorkspaceDir, false, rec.WorkspaceOwner
	}
	return r
}
