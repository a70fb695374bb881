// Package sandbox is the contract between agentbox and the engines that run
// its sandboxes: a Driver creates, recovers and lists sandboxes; a Sandbox is
// one running, locked-down environment whose guest daemon executes commands
// and file operations. Implementations live in subpackages (docker/,
// microvm/) and all pass the conformance suite in sandboxtest/. fake/ is a
// driver for tests only: the real guest daemon as a plain host process,
// isolating nothing, on which the tests that are not about isolation run
// without an engine; it passes the suite's cases that are not about
// isolation.
//
// Rules every implementation follows:
//   - A non-zero exit code is data (a guest.ExecResult), not an error. An error
//     means the sandbox or the connection to it broke.
//   - Destroy is idempotent and removes everything the sandbox owns: the engine
//     object and its host directories (but never a caller-owned workspace).
//   - Nothing in a sandbox runs as root, has network access unless the spec asks
//     for it, or can exceed its memory, CPU and pids limits.
package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/guest"
)

// Errors shared by every driver; check them with errors.Is.
var (
	// ErrGone means the sandbox no longer exists or its guest stopped answering.
	ErrGone = errors.New("sandbox gone")
	// ErrImageMissing means the sandbox image is not present in the engine.
	ErrImageMissing = errors.New("sandbox image missing")
	// ErrEngineUnavailable means the container engine cannot be reached.
	ErrEngineUnavailable = errors.New("container engine unavailable")
	// ErrInvalidSpec means the caller asked for something the driver refuses.
	ErrInvalidSpec = errors.New("invalid sandbox spec")
	// ErrNoSpace means the host's disk is below its free-space floor, so no
	// new sandbox starts.
	ErrNoSpace = errors.New("host disk below its free-space floor")
	// ErrDiskQuota means the sandbox wrote more than its disk quota and was
	// stopped.
	ErrDiskQuota = errors.New("sandbox disk quota exceeded")
	// ErrIsolationUnavailable means the isolation tier asked for cannot run
	// here; the message says what is missing and how to install it. A
	// driver never runs a sandbox under another tier instead.
	ErrIsolationUnavailable = errors.New("isolation tier unavailable")
)

// Driver creates sandboxes on one engine.
type Driver interface {
	// Create starts a sandbox and returns once its guest answers.
	Create(ctx context.Context, spec Spec) (Sandbox, error)
	// Recover reattaches to a sandbox created earlier (e.g. before a restart);
	// it returns ErrGone if the sandbox is no longer running. It accepts
	// every handle version this driver ever wrote.
	Recover(ctx context.Context, h Handle) (Sandbox, error)
	// List returns every sandbox of this installation, running or not, so that
	// a reaper can destroy the orphans. A listed handle is good for Remove;
	// Recover needs the handle Sandbox.Handle gave. A sandbox this process
	// made unbound and has not bound yet is left out: it is no orphan.
	List(ctx context.Context) ([]Listed, error)
	// Remove destroys the sandbox h names, whether or not it still runs, as
	// Sandbox.Destroy does. It is how a reaper removes orphans.
	Remove(ctx context.Context, h Handle) error
	// Capabilities says what the driver's sandboxes offer.
	Capabilities() Capabilities
	// Close releases the driver's connection to its engine. Sandboxes keep
	// running; another driver may Recover them.
	Close() error
}

// Listed is a sandbox as Driver.List finds it.
type Listed struct {
	Handle Handle
	// Running says whether the sandbox still runs.
	Running bool
}

// Sandbox is one running sandbox.
type Sandbox interface {
	// Handle identifies the sandbox; it is persisted so Recover can find it again.
	Handle() Handle
	// Guest is the client of the daemon inside the sandbox.
	Guest() *guest.Client
	// Destroy stops the sandbox and removes the engine object and the host
	// directories the sandbox owns. It is idempotent.
	Destroy(ctx context.Context) error
}

// Spec describes a sandbox to create. Zero values mean the driver's
// defaults. What ties the sandbox to a job is its Binding.
type Spec struct {
	// Owner names who may reap the sandbox as an orphan (a server's worker
	// ID); empty for sandboxes no reaper may touch, like agentbox exec's.
	Owner string
	// Isolation is the tier the sandbox must run under (IsolationContainer,
	// ...); empty for the driver's own. A driver refuses, with
	// ErrIsolationUnavailable, a tier other than its Capabilities say.
	Isolation string
	// Image overrides the driver's default sandbox image.
	Image string
	// Network overrides the default network mode ("none"). The driver
	// refuses a mode its Capabilities do not allow, "host" always.
	Network string
	Limits  Limits
	// Display is the desktop's screen size; zero fields take 1024x768.
	Display Display
	// Binding, if set, binds the sandbox to its job as it is created (what
	// Start does on a driver without Capabilities.Bind); nil makes an
	// unbound sandbox, for Binder.Bind to bind later.
	Binding *Binding
}

// BindingOf is spec's Binding, the zero one (unbound) if it has none.
func BindingOf(spec Spec) Binding {
	if spec.Binding == nil {
		return Binding{}
	}
	return *spec.Binding
}

// CheckDisplay refuses a display size outside 320x200..7680x4320 (one
// field set without the other included) and a Binding whose WebBase is
// bad (CheckWebBase).
func CheckDisplay(spec Spec) error {
	d := spec.Display
	if d != (Display{}) && (d.Width < 320 || d.Height < 200 || d.Width > 7680 || d.Height > 4320) {
		return fmt.Errorf("%w: display %dx%d is outside 320x200..7680x4320", ErrInvalidSpec, d.Width, d.Height)
	}
	return CheckWebBase(BindingOf(spec).WebBase)
}

// ParseDisplay reads a display size as `agentbox guest --display-size`
// takes it, WIDTHxHEIGHT, within the bounds CheckDisplay holds.
func ParseDisplay(s string) (Display, error) {
	var d Display
	if _, err := fmt.Sscanf(s, "%dx%d", &d.Width, &d.Height); err != nil {
		return Display{}, fmt.Errorf("display size %q: want WIDTHxHEIGHT, like 1024x768", s)
	}
	if err := CheckDisplay(Spec{Display: d}); err != nil {
		return Display{}, err
	}
	return d, nil
}

// CheckWebBase refuses a web base that is not a clean absolute URL path
// of letters, digits and -._~/ ("" is none).
func CheckWebBase(b string) error {
	if b != "" && !webBaseRE.MatchString(b) {
		return fmt.Errorf("%w: web base %q must be an absolute URL path of letters, digits and -._~/ without a trailing slash", ErrInvalidSpec, b)
	}
	return nil
}

var webBaseRE = regexp.MustCompile(`^(/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)+$`)

// Display is the size of a sandbox's virtual screen, in pixels.
type Display struct {
	Width, Height int
}

// Limits are a sandbox's resource limits; zero fields take the defaults.
type Limits struct {
	MemoryBytes int64
	NanoCPUs    int64
	PidsLimit   int64
	// DiskBytes bounds everything the sandbox can write on the host's disk
	// (its workspace and its state directory).
	DiskBytes int64
	// NoFile is the RLIMIT_NOFILE of every process in the sandbox.
	NoFile int64
}

// FillDefaults sets l's unset (zero or negative) fields to the limits a
// driver applies by default, the settings' (AGENTBOX_SANDBOX_MEMORY,
// _CPUS, _PIDS, _DISK and _NOFILE): 2 GiB of memory, one CPU, 512
// processes, 10 GiB of disk and 1024 open files.
func (l *Limits) FillDefaults() {
	d := config.Default().Sandbox
	for _, f := range []struct {
		v   *int64
		def int64
	}{{&l.MemoryBytes, d.MemoryBytes}, {&l.NanoCPUs, d.NanoCPUs}, {&l.PidsLimit, d.PidsLimit}, {&l.DiskBytes, d.DiskBytes}, {&l.NoFile, d.NoFile}} {
		if *f.v <= 0 {
			*f.v = f.def
		}
	}
}

// Or returns l with each zero field taken from def: a spec's limits, the
// driver's defaults where it sets none.
func (l Limits) Or(def Limits) Limits {
	return Limits{MemoryBytes: cmp.Or(l.MemoryBytes, def.MemoryBytes), NanoCPUs: cmp.Or(l.NanoCPUs, def.NanoCPUs),
		PidsLimit: cmp.Or(l.PidsLimit, def.PidsLimit), DiskBytes: cmp.Or(l.DiskBytes, def.DiskBytes), NoFile: cmp.Or(l.NoFile, def.NoFile)}
}

// Inode bounds: a sandbox may make one file, directory or link per
// InodeBytes of its disk quota, at least MinInodes and at most MaxInodes.
// Its quota's bytes alone bound no inodes: 300,000 empty files cost 5.9 MiB
// of a 10 GiB quota and 300,315 of the host's inodes after the copy back.
// The default 10 GiB quota allows 163,840 entries: `npm install` of a React
// app makes ~40,000; numpy and pandas are 4,667 entries, and the sandbox
// image's whole dist-packages 24,073.
const (
	InodeBytes = 64 << 10
	MinInodes  = 16 << 10
	MaxInodes  = 1 << 20
)

// InodeLimit is the most entries (files, directories, links) a sandbox
// whose disk quota is diskBytes may hold: see InodeBytes.
func InodeLimit(diskBytes int64) int64 {
	return min(max(diskBytes/InodeBytes, MinInodes), MaxInodes)
}

// Stopper is implemented by sandboxes that the driver itself may stop, such
// as one that passed its disk quota where the kernel cannot enforce it.
// Stopped returns why, or nil while the sandbox is allowed to run; the
// caller ends the sandbox's work with that error.
type Stopper interface {
	Stopped() error
}
