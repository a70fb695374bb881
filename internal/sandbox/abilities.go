package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// Optional abilities. A Driver or a Sandbox may have any of these; a caller
// finds one by type assertion and does without it when it is missing. Each
// is covered by sandboxtest on every driver that has it.
//
// Who has which: docker has Binder (where its scratch workspace is a loop
// disk: root, loop devices), Exiter, Pauser, Availabler, LiveWorkspacer,
// HostPather and QuotaModer; microvm has Binder, Exiter, Availabler,
// LiveWorkspacer, HostPather and QuotaModer (no Pauser: it has no QEMU
// monitor yet); drivers.Tiers is an IsolationChecker. No driver is a
// Snapshotter yet (issue 30).

// Binding ties a sandbox to one job: its workspace, its labels, its web
// base, its environment. A sandbox created without one (Spec.Binding nil)
// is unbound: it runs its guest, serves nothing of a job's, and can wait
// in a pool until Binder.Bind gives it a job.
type Binding struct {
	// JobID names the job the sandbox now belongs to.
	JobID string
	// WorkspaceDir is a host directory the sandbox sees at /workspace. The
	// caller owns it and it outlives the sandbox. Empty: the sandbox keeps
	// the scratch workspace it was made with.
	WorkspaceDir string
	// ManagedWorkspace says WorkspaceDir is agentbox's own (a job's), not a
	// directory a person brought: the driver may hold its content on a disk
	// of its own while the sandbox runs and copy it back when it is
	// destroyed.
	ManagedWorkspace bool
	// Env is added to the environment of every command run after the bind.
	Env map[string]string
	// WebBase is the URL path under which the API serves the sandbox's web
	// services (a job's "/v1/jobs/{id}").
	WebBase string
}

// Binder is a sandbox that can be bound to a job after it was created, so
// that it can be made before its job exists (a warm pool). Its driver's
// Capabilities.Bind is true. Bind is called at most once; a second call
// fails with ErrInvalidSpec. A late bind takes a managed workspace only
// (ManagedWorkspace, or none): a person's own directory is mounted as it
// is, so Start gives it to Create.
type Binder interface {
	Bind(ctx context.Context, b Binding) error
}

// CheckBinding refuses, with ErrInvalidSpec, a binding whose workspace is
// not an existing absolute directory other than / or whose web base is
// bad (CheckWebBase); late (for Binder.Bind), also a person's own
// directory, which a driver mounts as it is at create.
func CheckBinding(b Binding, late bool) error {
	if w := b.WorkspaceDir; w != "" {
		if late && !b.ManagedWorkspace {
			return fmt.Errorf("%w: a person's workspace %s is mounted as it is, at create, not bound late", ErrInvalidSpec, w)
		}
		fi, err := os.Stat(w)
		if !filepath.IsAbs(w) || filepath.Clean(w) == "/" || err != nil || !fi.IsDir() {
			return fmt.Errorf("%w: workspace %q must be an existing absolute directory other than /", ErrInvalidSpec, w)
		}
	}
	return CheckWebBase(b.WebBase)
}

// Start creates a sandbox for spec bound to b in one step (b given to
// Create as spec.Binding), as jobs, exec, run and chat make theirs: the
// sandbox carries its job from its first moment, the engine's labels
// (io.agentbox.job) included, which a sandbox bound later cannot get
// (Docker cannot relabel a container). A pool makes its sandboxes with
// Create and no Binding instead, and binds one with Binder.Bind when its
// job comes (drivers whose Capabilities.Bind is true); sandboxtest's
// BindLater checks that path on every driver that has it.
func Start(ctx context.Context, d Driver, spec Spec, b Binding) (Sandbox, error) {
	spec.Binding = &b
	return d.Create(ctx, spec)
}

// BindLate creates an unbound sandbox for spec and binds it to b, the two
// steps of a pooled sandbox taken together (what a pool does when it is
// empty); it fails with ErrInvalidSpec on a driver that cannot bind late.
// A sandbox that fails to bind is destroyed.
func BindLate(ctx context.Context, d Driver, spec Spec, b Binding) (Sandbox, error) {
	if !d.Capabilities().Bind {
		return nil, fmt.Errorf("%w: this driver cannot bind a sandbox after creating it", ErrInvalidSpec)
	}
	spec.Binding = nil
	sb, err := d.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	bd, ok := sb.(Binder)
	if !ok {
		_ = sb.Destroy(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("%w: driver says it binds late but its sandbox has no Bind", ErrInvalidSpec)
	}
	if err := bd.Bind(ctx, b); err != nil {
		_ = sb.Destroy(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("bind sandbox: %w", err)
	}
	return sb, nil
}

// Exiter is a sandbox that can say why it ended on its own (its container
// or VM exited): Exited returns that reason, or nil while it runs.
type Exiter interface {
	Exited(ctx context.Context) error
}

// Availabler is a driver that can say whether its tier runs on this host
// (a runtime the engine may lack, a hypervisor that is missing): nil, or an
// error wrapping ErrIsolationUnavailable that says what to install.
type Availabler interface {
	Available(ctx context.Context) error
}

// IsolationChecker is a driver of several isolation tiers that can say
// whether one of them runs here, as Availabler does for a single tier.
type IsolationChecker interface {
	Check(ctx context.Context, isolation string) error
}

// LiveWorkspacer is a sandbox whose workspace, while it runs, lives
// somewhere other than its Binding's WorkspaceDir (a disk of the driver's
// own): LiveWorkspace is that host directory, to read the files of a
// running job.
type LiveWorkspacer interface {
	LiveWorkspace() string
}

// HostPather is a driver that can name every host path a sandbox owns, so
// that a test (and a reaper) can check none is left after Remove.
type HostPather interface {
	HostPaths(h Handle) ([]string, error)
}

// QuotaModer is a driver that says how it enforces the disk quota of a
// sandbox whose workspace is under dir ("xfs", "loop", "watchdog").
type QuotaModer interface {
	QuotaMode(dir string) string
}

// Pauser is a sandbox that can be frozen and thawed (Capabilities.Pause):
// a frozen sandbox's processes use no CPU and keep their memory.
type Pauser interface {
	Pause(ctx context.Context) error
	Unpause(ctx context.Context) error
}

// Snapshotter is a sandbox whose state can be saved (Capabilities.Snapshot)
// and later given to Driver.Recover-like restore by its driver.
type Snapshotter interface {
	Snapshot(ctx context.Context) (Handle, error)
}
