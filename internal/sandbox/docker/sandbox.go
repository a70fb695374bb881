package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/loopdisk"
)

// Sandbox is one container.
type Sandbox struct {
	d  *Driver
	h  record
	g  *guest.Client
	mu sync.Mutex
	// stopped is why the driver stopped the sandbox (its disk quota).
	stopped atomic.Pointer[error]
	// unwatch ends the disk watchdog, if one runs, and waits for it.
	unwatch func()
	// bound says the sandbox has its job (given at create, by Bind, or
	// recovered); guarded by mu.
	bound bool
}

var (
	_ sandbox.Sandbox = (*Sandbox)(nil)
	_ sandbox.Stopper = (*Sandbox)(nil)
)

// watch starts the disk watchdog where the kernel does not enforce the
// sandbox's quota.
func (s *Sandbox) watch() {
	if s.h.DiskBytes <= 0 || s.d.modeOf(s.h) != QuotaWatch {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.watchDisk(ctx)
	}()
	s.unwatch = func() {
		cancel()
		<-done
	}
}

func (d *Driver) newSandbox(h record) *Sandbox {
	s := &Sandbox{d: d, h: h, bound: true}
	if h.Transport == sandbox.TransportTCP {
		s.g = guest.New(d.netnsDialer(h.Ref, h.GuestAddr), h.Secret)
	} else {
		s.g = guest.New(guest.UnixDialerAt(h.StateDir, filepath.Join("run", guest.SocketName)), "")
	}
	return s
}

// Handle identifies the sandbox.
func (s *Sandbox) Handle() sandbox.Handle { return s.h.handle() }

// State is the driver's record of the sandbox, as its handle holds it.
func (s *Sandbox) State() State { return s.h.State }

// LiveWorkspace is the host directory holding the sandbox's /workspace
// while it runs: its loop disk's mount point when it has one (the
// workspace directory gets the content back only at Destroy), else the
// workspace directory itself. The sandbox writes it: read it beneath an
// os.Root, following no link.
func (s *Sandbox) LiveWorkspace() string {
	if loopdisk.Has(s.h.StateDir) {
		_, mnt := loopdisk.Paths(s.h.StateDir)
		return mnt
	}
	return s.h.WorkspaceDir
}

// ContainerID is the ID of the sandbox's container, for tools that talk to
// the engine (the benchmark's docker exec baseline).
func (s *Sandbox) ContainerID() string { return s.h.Ref }

// Guest is the client of the sandbox's guest.
func (s *Sandbox) Guest() *guest.Client { return s.g }

// Destroy removes the container and the sandbox's host directories. It runs
// to the end even if ctx is cancelled, and may be called any number of times.
func (s *Sandbox) Destroy(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unwatch != nil {
		s.unwatch()
		s.unwatch = nil
	}
	if s.h.OwnsWorkspace && !isRoot() {
		s.emptyWorkspace(ctx)
	}
	s.g.Close()
	defer s.d.unbound.Delete(s.h.ID)
	return s.d.remove(ctx, s.h)
}

// emptyWorkspace deletes the scratch workspace's content from inside, as the
// uid that owns it: a host user other than root or uid 1000 could not delete
// the directories the agent made. Best effort: the guest may be gone.
func (s *Sandbox) emptyWorkspace(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, _ = s.g.Exec(ctx, guest.ExecRequest{Cmd: []string{"find", WorkspacePath, "-mindepth", "1", "-delete"}, TimeoutMS: 25_000})
}

// Remove destroys the sandbox h names, running or not: the container, its
// state directory and, if the sandbox made it, its workspace. It runs to the
// end even if ctx is cancelled; removing what is already gone is no error.
func (d *Driver) Remove(ctx context.Context, h sandbox.Handle) error {
	r, err := recordOf(h)
	if err != nil {
		return fmt.Errorf("destroy sandbox %s: %w", h.ID, err)
	}
	return d.remove(ctx, r)
}

func (d *Driver) remove(ctx context.Context, h record) error {
	// Not cancelled with the caller, but bounded: a hung engine must not hang
	// a server's shutdown.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if h.Ref != "" {
		err := d.cli.ContainerRemove(ctx, h.Ref, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("destroy sandbox %s: %w", h.ID, engineErr(err))
		}
	}
	if err := d.owned(h); err != nil {
		return err
	}
	// What could not be handed back is said, but the sandbox's directories
	// go all the same: nothing would be left to reap them later.
	var errs []error
	if err := d.handBack(h); err != nil {
		errs = append(errs, fmt.Errorf("destroy sandbox %s: %w", h.ID, err))
	}
	if h.StateDir != "" {
		if err := os.RemoveAll(h.StateDir); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox dir: %w", err))
		}
	}
	if h.OwnsWorkspace && h.WorkspaceDir != "" {
		if err := os.RemoveAll(h.WorkspaceDir); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox workspace: %w", err))
		}
	}
	return errors.Join(errs...)
}

// handBack lifts the workspace's quota and gives a caller's workspace back
// to its owner, once no sandbox process can touch it.
func (d *Driver) handBack(h record) error {
	defer d.freeUID(h.UID)
	if !isRoot() || h.WorkspaceDir == "" {
		return nil
	}
	var err error
	if loopdisk.Has(h.StateDir) {
		// A caller's workspace gets the disk's content back; a scratch
		// one is removed with the state dir.
		err = loopdisk.Remove(h.StateDir, h.WorkspaceDir, !h.OwnsWorkspace)
	}
	if _, serr := os.Lstat(h.WorkspaceDir); serr != nil {
		return err // removed already
	}
	err = errors.Join(err, releaseQuota(h))
	var o owner
	if _, scanErr := fmt.Sscanf(h.WorkspaceOwner, "%d:%d", &o.uid, &o.gid); scanErr == nil && !h.OwnsWorkspace {
		err = errors.Join(err, loopdisk.GiveBack(h.WorkspaceDir, o.uid, o.gid))
	}
	return err
}

// owned refuses to delete directories outside the driver's state dir: a
// handle comes from the store or from container labels, not from us alone.
func (d *Driver) owned(h record) error {
	dirs := []string{h.StateDir}
	if h.OwnsWorkspace {
		dirs = append(dirs, h.WorkspaceDir)
	}
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		rel, err := filepath.Rel(d.cfg.StateDir, dir)
		if err != nil || !filepath.IsLocal(rel) {
			return fmt.Errorf("destroy sandbox %s: %w: %s is outside the state dir %s", h.ID, sandbox.ErrInvalidSpec, dir, d.cfg.StateDir)
		}
	}
	return nil
}

// exitGrace is how long Exited waits for a container to stop.
const exitGrace = 5 * time.Second

// Exited says why the sandbox's container has ended on its own (killed
// at its memory limit, or its exit code), or nil while it runs or when the
// engine cannot say. Under gVisor a sandbox reaching its memory or pids
// limit dies whole, guest included, so the guest's stream ending early is
// all its client sees; this is the why.
// The stream ends a moment before the container does: it waits up to
// exitGrace for the container to stop.
func (s *Sandbox) Exited(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, exitGrace)
	defer cancel()
	waited, errc := s.d.cli.ContainerWait(wctx, s.h.Ref, container.WaitConditionNotRunning)
	select {
	case <-waited:
	case <-errc:
	}
	info, err := s.d.cli.ContainerInspect(ctx, s.h.Ref)
	if err != nil || info.State == nil || info.State.Running {
		return nil
	}
	why := fmt.Sprintf("its container exited with code %d", info.State.ExitCode)
	if info.State.OOMKilled {
		why = "it was killed at its memory limit"
	}
	if s.d.cfg.Runtime == RuntimeGVisor {
		why += " (under gVisor, a sandbox reaching its memory or pids limit dies whole)"
	}
	return fmt.Errorf("%w: it died: %s", sandbox.ErrGone, why)
}
