package wiring

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/units"
)

// SandboxFlags are a sandbox's settings as a person types them after
// `agentbox exec` or `run`: sizes such as 512m, CPUs such as 1.5, a host
// directory, KEY=VALUE pairs. Empty means the configured default.
type SandboxFlags struct {
	Memory, CPUs, Disk, Workspace string
	// SandboxNetwork is the container network (exec --network bridge or a
	// named network); "" for AGENTBOX_SANDBOX_NETWORK's.
	SandboxNetwork string
	// Network is the egress policy the sandbox runs with, as
	// NetworkFlags.Policy checked it (exec's --allow, --deny, --preset,
	// --secret, --network none|open).
	Network egress.Policy
	// Isolation is the tier (--isolation); "" for AGENTBOX_ISOLATION's.
	Isolation string
	Pids      int64
	Timeout   time.Duration
	Env       []string
}

// Spec parses f into a sandbox spec, its Binding the workspace and the
// environment asked for; an error names the flag at fault.
func (f SandboxFlags) Spec() (sandbox.Spec, error) {
	spec := sandbox.Spec{Binding: &sandbox.Binding{}}
	b := spec.Binding
	var err error
	if spec.Limits, err = f.limits(); err != nil {
		return spec, err
	}
	spec.Network, spec.Isolation = f.SandboxNetwork, f.Isolation
	if f.Workspace != "" {
		fi, err := os.Stat(f.Workspace)
		if err != nil || !fi.IsDir() {
			return spec, fmt.Errorf("--workspace %s: not a directory", f.Workspace)
		}
		if b.WorkspaceDir, err = filepath.Abs(f.Workspace); err != nil {
			return spec, fmt.Errorf("path %s: %w", f.Workspace, err)
		}
	}
	b.Env = map[string]string{}
	for _, kv := range f.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return spec, fmt.Errorf("--env %q: want KEY=VALUE", kv)
		}
		b.Env[k] = v
	}
	return spec, nil
}

// limits parses the resource limits and checks the timeout.
func (f SandboxFlags) limits() (sandbox.Limits, error) {
	var l sandbox.Limits
	var err error
	if f.Memory != "" {
		if l.MemoryBytes, err = units.ParseSize(f.Memory); err != nil {
			return l, fmt.Errorf("--memory: %w", err)
		}
	}
	if f.CPUs != "" {
		if l.NanoCPUs, err = units.ParseCPUs(f.CPUs); err != nil {
			return l, fmt.Errorf("--cpus: %w", err)
		}
	}
	if f.Disk != "" {
		if l.DiskBytes, err = units.ParseSize(f.Disk); err != nil {
			return l, fmt.Errorf("--disk: %w", err)
		}
		if l.DiskBytes < 64<<20 {
			return l, errors.New("--disk: at least 64m")
		}
	}
	if f.Pids < 0 || f.Timeout <= 0 {
		return l, errors.New("--pids must not be negative and --timeout must be positive")
	}
	l.PidsLimit = f.Pids
	return l, nil
}

// NetworkFlags are an egress policy as a person types it after `agentbox
// submit`, `run`, `exec` or `chat`: --allow and --deny entries, --preset
// and --secret names, --network none|open.
type NetworkFlags struct {
	Allow, Deny, Presets, Secrets []string
	// Mode is none or open (--network); "" for allow when anything is
	// named, else the operator's default.
	Mode string
}

// IsZero says no network flag was given.
func (f NetworkFlags) IsZero() bool {
	return f.Mode == "" && len(f.Allow) == 0 && len(f.Deny) == 0 && len(f.Presets) == 0 && len(f.Secrets) == 0
}

// Parse reads the flags into a policy, unchecked against the operator's
// settings (a server checks it); an error names the flag.
func (f NetworkFlags) Parse() (egress.Policy, error) {
	p := egress.Policy{Mode: f.Mode, Presets: f.Presets, Secrets: f.Secrets}
	if f.Mode != "" && f.Mode != egress.ModeNone && f.Mode != egress.ModeOpen {
		return p, fmt.Errorf("%w: --network %q: want none or open (--allow, --preset and --secret imply allow)", jobs.ErrBadNetwork, f.Mode)
	}
	var err error
	if p.Allow, err = parseRules("--allow", f.Allow); err != nil {
		return p, err
	}
	p.Deny, err = parseRules("--deny", f.Deny)
	return p, err
}

func parseRules(flag string, entries []string) ([]egress.Rule, error) {
	var out []egress.Rule
	for _, e := range entries {
		r, err := egress.ParseRule(e)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", jobs.ErrBadNetwork, flag, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Check is Policy against cfg's egress settings (EgressPolicy).
func (f NetworkFlags) Check(cfg config.Config) (egress.Policy, error) {
	c, err := EgressPolicy(cfg)
	if err != nil {
		return egress.Policy{}, err
	}
	return f.Policy(c)
}

// Policy is the policy the flags ask for as a sandbox or job runs with
// it: checked against c (the operator's presets, secrets and modes), the
// operator's default when no flag is given. An error names the flag and
// wraps jobs.ErrBadNetwork.
func (f NetworkFlags) Policy(c *egress.Config) (egress.Policy, error) {
	p, err := f.Parse()
	if err != nil {
		return p, err
	}
	if c == nil {
		c = &egress.Config{}
	}
	checked, err := c.Check(p)
	var fe *egress.FieldError
	if errors.As(err, &fe) {
		return checked, fmt.Errorf("%w: %s: %w", jobs.ErrBadNetwork, flagOf(fe.Field), fe.Err)
	}
	return checked, err
}

// flagOf is the flag that sets a policy's field ("presets[0]").
func flagOf(field string) string {
	name, _, _ := strings.Cut(field, "[")
	switch name {
	case "allow", "deny":
		return "--" + name
	case "presets":
		return "--preset"
	case "secrets":
		return "--secret"
	}
	return "--network"
}

// SetNetwork sets f's container network and egress policy from exec's
// --network value and the other network flags nf, the policy checked
// against c. none and open are the egress mode (the container keeps no
// network of its own: what it reaches goes through the proxy); anything
// else (bridge, a named network) is the container's network, outside the
// proxy, which the other network flags cannot go with. "" leaves both to
// the defaults.
func (f *SandboxFlags) SetNetwork(value string, nf NetworkFlags, c *egress.Config) error {
	switch value {
	case "":
	case egress.ModeNone, egress.ModeOpen:
		nf.Mode = value
		f.SandboxNetwork = egress.ModeNone
	default:
		if !nf.IsZero() {
			return errors.New("--network " + value + " gives the sandbox a container network of its own, outside the egress proxy: --allow, --deny, --preset and --secret need --network none, open or none given")
		}
		f.SandboxNetwork = value
	}
	var err error
	f.Network, err = nf.Policy(c)
	return err
}
