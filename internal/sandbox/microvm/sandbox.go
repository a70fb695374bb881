package microvm

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// shutdownGrace is how long Destroy waits for the guest to power off
// before it kills QEMU.
const shutdownGrace = 5 * time.Second

// running is a VM this process started: only this process can reach it
// (its guest's port is a connection QEMU made to this process, and QEMU
// dies with it).
type running struct {
	vm   *VM
	h    sandbox.Handle
	st   State
	stop sync.Once
	// stopped is why the driver stopped the VM (its disk quota), or nil.
	stopped atomic.Pointer[error]
	// unwatch ends the disk watchdog, or is nil when none runs.
	unwatch func()
	// mu guards h, st and bound, which Bind changes.
	mu sync.Mutex
	// bound says the VM has its job (given at create or by Bind).
	bound bool
}

// vms are the VMs this process runs, by sandbox ID, shared by every
// Driver of the process, as the VMs are the process's.
var vms sync.Map // string -> *running

// destroy stops the VM (once) and removes what the sandbox owns on the
// host (each time: it is idempotent).
func (r *running) destroy(ctx context.Context) error {
	r.stop.Do(func() {
		if r.unwatch != nil {
			r.unwatch()
		}
		_ = r.vm.Close(ctx, shutdownGrace) // it kills QEMU if the guest does not power off
		vms.Delete(r.h.ID)
		releaseUID(r.st.UID)
	})
	r.mu.Lock()
	st := r.st
	r.mu.Unlock()
	return removeState(st)
}

// Sandbox is one microVM sandbox.
type Sandbox struct {
	r      *running
	client *guest.Client
}

var (
	_ sandbox.Sandbox = (*Sandbox)(nil)
	_ sandbox.Stopper = (*Sandbox)(nil)
)

// Handle identifies the sandbox.
func (s *Sandbox) Handle() sandbox.Handle {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return s.r.h
}

// LiveWorkspace is the host directory holding the VM's /workspace while
// it runs (what virtiofsd shares): the loop disk's mount point when it
// has one, else the workspace directory. The VM writes it: read it
// beneath an os.Root, following no link (checkpoints, a running job's
// file snapshots).
func (s *Sandbox) LiveWorkspace() string { return sharedDir(s.State()) }

// Guest is the client of the VM's guest daemon.
func (s *Sandbox) Guest() *guest.Client { return s.client }

// Destroy powers the VM off (killing QEMU and virtiofsd after a grace),
// copies the loop disk's content back to a job's workspace and removes
// the disk, gives a caller's workspace back to its owner and removes the
// state directory. It is idempotent.
func (s *Sandbox) Destroy(ctx context.Context) error { return s.r.destroy(ctx) }

// Stopped returns why the driver stopped the VM (its workspace passed its
// disk quota under the watchdog), or nil.
func (s *Sandbox) Stopped() error {
	if p := s.r.stopped.Load(); p != nil {
		return *p
	}
	return nil
}

// State is the sandbox's record, as in its handle.
func (s *Sandbox) State() State {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return s.r.st
}

// PID is QEMU's process ID.
func (s *Sandbox) PID() int { return s.r.vm.PID() }

// HostPIDs are the host processes the sandbox is: QEMU and, if it has
// one, its workspace's virtiofsd (what an idle sandbox costs the host).
func (s *Sandbox) HostPIDs() []int { return s.r.vm.hostPIDs() }

// exitGrace is how long Exited waits for QEMU to exit: the guest's stream
// ends a moment before the VM powers off.
const exitGrace = 5 * time.Second

var _ sandbox.Exiter = (*Sandbox)(nil)

// Exited says that the VM has ended on its own (QEMU exited: the guest
// died and the VM powered off, or QEMU was killed), waiting up to
// exitGrace for it, or nil while it runs.
func (s *Sandbox) Exited(ctx context.Context) error {
	t := time.NewTimer(exitGrace)
	defer t.Stop()
	select {
	case <-s.r.vm.Exited():
		return fmt.Errorf("%w: it died: its VM exited", sandbox.ErrGone)
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}
