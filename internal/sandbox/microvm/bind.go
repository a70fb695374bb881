package microvm

import (
	"context"
	"fmt"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/loopdisk"
)

// Late binding (sandbox.Binder). A VM made with no Binding boots on a
// scratch workspace held on a loop disk of its quota's size, which
// virtiofsd shares (cache=auto: the guest sees what the host adds). Bind
// copies the job's workspace onto that disk (the quota holds), makes the
// job's directory the home the disk's content goes back to at Destroy,
// tells the guest the job's environment and web base (POST /bind), and
// rewrites the sandbox's handle.json with the job, for List.

var _ sandbox.Binder = (*Sandbox)(nil)

// heldUnbound says this process runs the VM id and has not bound it yet.
func heldUnbound(id string) bool {
	v, ok := vms.Load(id)
	if !ok {
		return false
	}
	r := v.(*running)
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.bound
}

// Bind binds an unbound sandbox to its job: see the comment above.
func (s *Sandbox) Bind(ctx context.Context, b sandbox.Binding) error {
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bound {
		return fmt.Errorf("%w: sandbox %s is bound already", sandbox.ErrInvalidSpec, r.h.ID)
	}
	if err := sandbox.CheckBinding(b, true); err != nil {
		return err
	}
	st := r.st
	if b.WorkspaceDir != "" {
		owner, err := ownerOf(b.WorkspaceDir)
		if err != nil {
			return fmt.Errorf("workspace owner: %w", err)
		}
		if err := loopdisk.Fill(st.StateDir, b.WorkspaceDir, st.UID, st.UID); err != nil {
			return fmt.Errorf("bind sandbox %s: %w", r.h.ID, err)
		}
		// The scratch directory stays in the state dir, which Destroy removes.
		st.WorkspaceDir, st.OwnsWorkspace, st.WorkspaceOwner = b.WorkspaceDir, false, owner
	}
	// Always told, even of nothing: a guest left unbound would take a
	// binding from any process in the sandbox (its socket is open to them).
	if err := s.client.Bind(ctx, guest.BindRequest{Env: b.Env, WebBase: b.WebBase}); err != nil {
		return fmt.Errorf("bind sandbox %s: %w", r.h.ID, err)
	}
	h, err := handleOf(r.h.ID, b.JobID, r.h.Owner, st)
	if err == nil {
		err = writeHandle(st.StateDir, h)
	}
	if err != nil {
		return fmt.Errorf("bind sandbox %s: %w", r.h.ID, err)
	}
	r.st, r.h, r.bound = st, h, true
	return nil
}
