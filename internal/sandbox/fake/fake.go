// Package fake is a sandbox driver for tests that are not about
// isolation: each sandbox is the real guest daemon (internal/guest/daemon)
// run as a plain process of the host user, in a directory of its own, on a
// unix socket. Like a container, the process is not the creator's child:
// it outlives a creator killed with -9, and a new driver on the same
// directory Recovers it. It passes every sandboxtest case that is not
// about isolation (sandboxtest.Gaps names the others, with why).
//
// It isolates nothing: a command in a fake sandbox runs as the host user,
// sees the host's files, network and processes. New therefore refuses to
// run outside a test binary (testing.Testing), and drivers.Open does not
// know it, so that no configuration can put untrusted code on it.
package fake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// Name is the driver's name in the handles it writes.
const Name = "fake"

// Isolation is the fake driver's Capabilities.Isolation: none. It is not
// one of sandbox.Isolations, so no job can ask for it.
const Isolation = "none"

// Config configures a Driver.
type Config struct {
	// Dir holds one directory per sandbox (its guest's socket, its
	// scratch workspace, its home). Keep it short: a unix socket's path
	// is at most 107 bytes. Two drivers on one Dir see the same sandboxes.
	Dir string
	// StandIn is a tier of sandbox.Isolations whose Specs the driver takes
	// all the same (isolating nothing), for a caller whose every request
	// names a tier: the scheduler, whose jobs always carry theirs. Empty:
	// a Spec naming any tier but Isolation is refused.
	StandIn string
}

// Driver runs fake sandboxes under Config.Dir.
type Driver struct {
	dir     string
	standIn string
}

// New returns a driver keeping its sandboxes under cfg.Dir. It refuses
// outside a test binary: a fake sandbox would run untrusted code as the
// host's user.
func New(cfg Config) (*Driver, error) {
	if !testing.Testing() {
		return nil, errors.New("fake sandbox driver: refused outside tests (it runs commands as the host user, with no isolation)")
	}
	if cfg.Dir == "" {
		return nil, errors.New("fake sandbox driver: no directory")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("fake sandbox driver: %w", err)
	}
	return &Driver{dir: cfg.Dir, standIn: cfg.StandIn}, nil
}

// state is the handle's State: where the sandbox lives and which process
// is its guest.
type state struct {
	Dir       string `json:"dir"`
	Workspace string `json:"workspace"`
	// Scratch says Workspace is the sandbox's own, removed with it.
	Scratch bool `json:"scratch,omitempty"`
	PID     int  `json:"pid"`
	// Start is the guest process's start time (/proc/PID/stat), so that a
	// reused PID is not taken for the guest.
	Start string `json:"start"`
}

// Capabilities implements sandbox.Driver.
func (d *Driver) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: Isolation, Networks: []string{"none"},
		Pause: true, Transport: sandbox.TransportUnix, Bind: true}
}

// Dir is the directory holding the driver's sandboxes.
func (d *Driver) Dir() string { return d.dir }

// Close implements sandbox.Driver; the sandboxes keep running.
func (d *Driver) Close() error { return nil }

// Create implements sandbox.Driver.
func (d *Driver) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if iso := spec.Isolation; iso != "" && iso != Isolation && iso != d.standIn {
		return nil, fmt.Errorf("%w: the fake driver isolates nothing, not %q", sandbox.ErrIsolationUnavailable, spec.Isolation)
	}
	if err := d.Capabilities().CheckNetwork(spec.Network); err != nil {
		return nil, err
	}
	if err := sandbox.CheckDisplay(spec); err != nil {
		return nil, err
	}
	id := newID()
	dir := filepath.Join(d.dir, id)
	st := state{Dir: dir, Workspace: filepath.Join(dir, "workspace"), Scratch: true}
	for _, sub := range []string{"workspace", "home", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, fmt.Errorf("fake sandbox: %w", err)
		}
	}
	h := sandbox.Handle{ID: id, Driver: Name, Owner: spec.Owner, Isolation: Isolation, Version: sandbox.HandleVersion}
	sb := &Sandbox{d: d, h: h, st: st, display: spec.Display}
	b, bound := binding(spec)
	if bound {
		sb.bind(b)
	}
	if err := sb.start(ctx); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return sb, nil
}

// binding is the job's data in spec; ok is false for an unbound sandbox.
func binding(spec sandbox.Spec) (b sandbox.Binding, ok bool) {
	return sandbox.BindingOf(spec), spec.Binding != nil
}

// Recover implements sandbox.Driver: ErrGone unless the guest still runs
// and answers.
func (d *Driver) Recover(ctx context.Context, h sandbox.Handle) (sandbox.Sandbox, error) {
	var st state
	if h.Driver != Name || json.Unmarshal(h.State, &st) != nil || st.Dir == "" {
		return nil, fmt.Errorf("%w: not a fake sandbox's handle", sandbox.ErrGone)
	}
	sb := &Sandbox{d: d, h: h, st: st}
	sb.client = guest.NewClientAt(st.Dir, guest.SocketName)
	if !sb.running() {
		return nil, fmt.Errorf("%w: fake sandbox %s: its guest is not running", sandbox.ErrGone, h.ID)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := sb.client.Health(ctx); err != nil {
		return nil, fmt.Errorf("%w: fake sandbox %s: %v", sandbox.ErrGone, h.ID, err)
	}
	return sb, nil
}

// List implements sandbox.Driver: every sandbox directory under Dir.
func (d *Driver) List(ctx context.Context) ([]sandbox.Listed, error) {
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("fake sandbox driver: %w", err)
	}
	var out []sandbox.Listed
	for _, e := range ents {
		h, err := readHandle(filepath.Join(d.dir, e.Name()))
		if err != nil {
			continue // being made or removed
		}
		sb := &Sandbox{d: d, h: h}
		json.Unmarshal(h.State, &sb.st)
		out = append(out, sandbox.Listed{Handle: h, Running: sb.running()})
	}
	return out, nil
}

// Remove implements sandbox.Driver.
func (d *Driver) Remove(ctx context.Context, h sandbox.Handle) error {
	var st state
	if err := json.Unmarshal(h.State, &st); err != nil || filepath.Dir(st.Dir) != filepath.Clean(d.dir) {
		return fmt.Errorf("%w: fake sandbox %s: not under %s", sandbox.ErrInvalidSpec, h.ID, d.dir)
	}
	return (&Sandbox{d: d, h: h, st: st}).Destroy(ctx)
}

// HostPaths implements sandbox.HostPather: the sandbox's directory.
func (d *Driver) HostPaths(h sandbox.Handle) ([]string, error) {
	var st state
	if err := json.Unmarshal(h.State, &st); err != nil {
		return nil, fmt.Errorf("fake sandbox %s: %w", h.ID, err)
	}
	return []string{st.Dir}, nil
}

// handleFile is the name of the file in a sandbox's directory holding its
// handle, for List.
const handleFile = "handle.json"

func readHandle(dir string) (sandbox.Handle, error) {
	var h sandbox.Handle
	b, err := os.ReadFile(filepath.Join(dir, handleFile))
	if err == nil {
		err = json.Unmarshal(b, &h)
	}
	return h, err
}

func newID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "fk" + hex.EncodeToString(b)
}
