package microvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// Recover returns the sandbox h if this process runs its VM and the VM
// still runs; otherwise sandbox.ErrGone. A VM dies with the process that
// started it, so after a restart every VM is gone and the job is
// restarted on its saved workspace.
func (d *Driver) Recover(_ context.Context, h sandbox.Handle) (sandbox.Sandbox, error) {
	if _, err := stateOf(h); err != nil {
		return nil, err
	}
	v, ok := vms.Load(h.ID)
	if !ok {
		return nil, fmt.Errorf("%w: microvm %s is not running in this process (a VM dies with the process that started it)", sandbox.ErrGone, h.ID)
	}
	r := v.(*running)
	select {
	case <-r.vm.Exited():
		return nil, fmt.Errorf("%w: microvm %s has stopped", sandbox.ErrGone, h.ID)
	default:
	}
	return &Sandbox{r: r, client: guest.New(r.vm.sess.Dial, "")}, nil
}

// List returns the sandboxes whose state directories are in the driver's
// state dir; one runs while its QEMU does. A VM this process made unbound
// and has not bound yet is left out: it is no orphan (a sandbox.Start or
// a pool holds it), and its handle names no job yet.
func (d *Driver) List(context.Context) ([]sandbox.Listed, error) {
	entries, err := os.ReadDir(d.cfg.StateDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list microvms: %w", err)
	}
	var out []sandbox.Listed
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(d.cfg.StateDir, e.Name(), handleFile))
		if err != nil {
			continue // not a sandbox's, or one being made or removed
		}
		var h sandbox.Handle
		if err := json.Unmarshal(b, &h); err != nil {
			continue
		}
		st, err := stateOf(h)
		if err != nil {
			continue
		}
		if heldUnbound(h.ID) {
			continue
		}
		out = append(out, sandbox.Listed{Handle: h, Running: qemuPID(st) != 0})
	}
	return out, nil
}

// Remove destroys the sandbox h: through its VM if this process runs it,
// else by killing its QEMU (checked to be this sandbox's, by its command
// line) and removing its state. Either way a job's workspace gets its loop
// disk's content back first: after a server was killed -9 the disk is
// still mounted and the job restarts on the workspace directory.
func (d *Driver) Remove(ctx context.Context, h sandbox.Handle) error {
	st, err := stateOf(h)
	if err != nil {
		return err
	}
	if v, ok := vms.Load(h.ID); ok {
		return v.(*running).destroy(ctx)
	}
	killQEMU(st)
	return removeState(st)
}

// HostPaths is the sandbox's state directory (with a scratch workspace
// inside it), for sandboxtest.
func (d *Driver) HostPaths(h sandbox.Handle) ([]string, error) {
	st, err := stateOf(h)
	if err != nil {
		return nil, err
	}
	return []string{st.StateDir}, nil
}
