package drivers

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/sandbox/microvm"
)

// Tiers is a sandbox.Driver over one driver per isolation tier: Create
// runs each spec under the tier it names (Spec.Isolation, else the
// default) and refuses, with sandbox.ErrIsolationUnavailable, a tier that
// cannot run here; it never falls back to another. Recover and Remove go
// to the tier a handle records. Its Capabilities are the default tier's.
type Tiers struct {
	def string
	by  map[string]sandbox.Driver
	// missing says why each tier without a driver cannot run.
	missing map[string]string
}

var _ sandbox.Driver = (*Tiers)(nil)

// NewTiers returns the tiers of by (a driver per tier; each reports the
// tier of its key), def the default one, and missing why the others
// cannot run.
func NewTiers(def string, by map[string]sandbox.Driver, missing map[string]string) (*Tiers, error) {
	for iso, d := range by {
		if got := d.Capabilities().Isolation; got != iso {
			return nil, fmt.Errorf("%w: the %s tier's driver runs %s sandboxes", sandbox.ErrInvalidSpec, iso, got)
		}
	}
	t := &Tiers{def: def, by: by, missing: missing}
	if _, ok := by[def]; !ok {
		return nil, fmt.Errorf("default isolation: %w", t.unavailable(def))
	}
	return t, nil
}

// Default is the tier of a spec that names none.
func (t *Tiers) Default() string { return t.def }

// Check says, with sandbox.ErrIsolationUnavailable, why the tier iso
// ("" for the default) cannot run here, or nil when it can.
func (t *Tiers) Check(ctx context.Context, iso string) error {
	_, err := t.pick(ctx, iso)
	return err
}

// Tier is the driver of the tier iso ("" for the default).
func (t *Tiers) Tier(ctx context.Context, iso string) (sandbox.Driver, error) {
	return t.pick(ctx, iso)
}

func (t *Tiers) pick(ctx context.Context, iso string) (sandbox.Driver, error) {
	if iso == "" {
		iso = t.def
	}
	if err := sandbox.CheckIsolation(iso); err != nil {
		return nil, err
	}
	d, ok := t.by[iso]
	if !ok {
		return nil, t.unavailable(iso)
	}
	if a, ok := d.(sandbox.Availabler); ok {
		if err := a.Available(ctx); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (t *Tiers) unavailable(iso string) error {
	why := t.missing[iso]
	if why == "" {
		why = "no driver for it is configured here"
	}
	return fmt.Errorf("%w: isolation %q: %s", sandbox.ErrIsolationUnavailable, iso, why)
}

// byHandle is the driver of the tier h records.
func (t *Tiers) byHandle(h sandbox.Handle) (sandbox.Driver, error) {
	iso := h.Isolation
	if iso == "" {
		iso = sandbox.IsolationContainer
	}
	if d, ok := t.by[iso]; ok {
		return d, nil
	}
	return nil, t.unavailable(iso)
}

// Create starts a sandbox under the tier spec names.
func (t *Tiers) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	d, err := t.pick(ctx, spec.Isolation)
	if err != nil {
		return nil, err
	}
	spec.Isolation = d.Capabilities().Isolation
	return d.Create(ctx, spec)
}

// Recover reattaches through the driver of the handle's tier.
func (t *Tiers) Recover(ctx context.Context, h sandbox.Handle) (sandbox.Sandbox, error) {
	d, err := t.byHandle(h)
	if err != nil {
		return nil, err
	}
	return d.Recover(ctx, h)
}

// Remove destroys h through the driver of its tier.
func (t *Tiers) Remove(ctx context.Context, h sandbox.Handle) error {
	d, err := t.byHandle(h)
	if err != nil {
		return err
	}
	return d.Remove(ctx, h)
}

// List lists every tier's sandboxes, each once: tiers on one engine see
// the same containers.
func (t *Tiers) List(ctx context.Context) ([]sandbox.Listed, error) {
	var out []sandbox.Listed
	seen := map[string]bool{}
	for _, iso := range t.tiers() {
		ls, err := t.by[iso].List(ctx)
		if err != nil {
			return nil, err
		}
		for _, l := range ls {
			if !seen[l.Handle.ID] {
				seen[l.Handle.ID] = true
				out = append(out, l)
			}
		}
	}
	return out, nil
}

// Capabilities are the default tier's.
//
// Bind is true only when every tier binds late: sandbox.Start asks it
// before Create picks the spec's tier.
func (t *Tiers) Capabilities() sandbox.Capabilities {
	c := t.by[t.def].Capabilities()
	for _, iso := range t.tiers() {
		c.Bind = c.Bind && t.by[iso].Capabilities().Bind
	}
	return c
}

// Close closes every tier's driver.
func (t *Tiers) Close() error {
	var errs []error
	for _, iso := range t.tiers() {
		errs = append(errs, t.by[iso].Close())
	}
	return errors.Join(errs...)
}

// tiers are the tiers with a driver, weakest first.
func (t *Tiers) tiers() []string {
	var out []string
	for _, iso := range sandbox.Isolations {
		if _, ok := t.by[iso]; ok {
			out = append(out, iso)
		}
	}
	return out
}

// OpenTiers opens the docker driver of o once per tier it can run (runc
// for container, runsc for gvisor) and the microVM driver, def being the
// default tier. The gvisor and microvm drivers are always made; whether
// the engine has runsc, or the host QEMU and the guest kernel, is asked
// at each Create and Check, so installing them needs no restart.
func OpenTiers(def string, o Options) (*Tiers, error) {
	if def == "" {
		def = sandbox.IsolationContainer
	}
	by := map[string]sandbox.Driver{}
	for _, iso := range []string{sandbox.IsolationContainer, sandbox.IsolationGVisor} {
		cfg := o.Docker
		cfg.Runtime = ""
		if iso == sandbox.IsolationGVisor {
			cfg.Runtime = docker.RuntimeGVisor
			cfg.Network = "none" // the only network runsc gives (see docker.Config.Runtime)
		}
		d, err := docker.New(cfg)
		if err != nil {
			closeAll(by)
			if iso != sandbox.IsolationContainer {
				err = fmt.Errorf("%s tier: %w", iso, err)
			}
			return nil, err
		}
		by[iso] = d
	}
	vm, err := microvm.NewDriver(o.MicroVM)
	if err != nil {
		closeAll(by)
		return nil, fmt.Errorf("%s tier: %w", sandbox.IsolationMicroVM, err)
	}
	by[sandbox.IsolationMicroVM] = vm
	t, err := NewTiers(def, by, nil)
	if err != nil {
		closeAll(by)
		return nil, err
	}
	return t, nil
}

func closeAll(by map[string]sandbox.Driver) {
	for _, d := range by {
		_ = d.Close()
	}
}
