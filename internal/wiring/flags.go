package wiring

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// SandboxFlags are a sandbox's settings as a person types them after
// `agentbox exec` or `run`: sizes such as 512m, CPUs such as 1.5, a host
// directory, KEY=VALUE pairs. Empty means the configured default.
type SandboxFlags struct {
	Memory, CPUs, Disk, Network, Workspace string
	// Isolation is the tier (--isolation); "" for AGENTBOX_ISOLATION's.
	Isolation string
	Pids      int64
	Timeout   time.Duration
	Env       []string
}

// Spec parses f into a sandbox spec; an error names the flag at fault.
func (f SandboxFlags) Spec() (sandbox.Spec, error) {
	var spec sandbox.Spec
	var err error
	if spec.Limits, err = f.limits(); err != nil {
		return spec, err
	}
	spec.Network, spec.Isolation = f.Network, f.Isolation
	if f.Workspace != "" {
		fi, err := os.Stat(f.Workspace)
		if err != nil || !fi.IsDir() {
			return spec, fmt.Errorf("--workspace %s: not a directory", f.Workspace)
		}
		if spec.WorkspaceDir, err = filepath.Abs(f.Workspace); err != nil {
			return spec, fmt.Errorf("path %s: %w", f.Workspace, err)
		}
	}
	spec.Env = map[string]string{}
	for _, kv := range f.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return spec, fmt.Errorf("--env %q: want KEY=VALUE", kv)
		}
		spec.Env[k] = v
	}
	return spec, nil
}

// limits parses the resource limits and checks the timeout.
func (f SandboxFlags) limits() (sandbox.Limits, error) {
	var l sandbox.Limits
	var err error
	if f.Memory != "" {
		if l.MemoryBytes, err = config.ParseMemory(f.Memory); err != nil {
			return l, fmt.Errorf("--memory: %w", err)
		}
	}
	if f.CPUs != "" {
		if l.NanoCPUs, err = config.ParseCPUs(f.CPUs); err != nil {
			return l, fmt.Errorf("--cpus: %w", err)
		}
	}
	if f.Disk != "" {
		if l.DiskBytes, err = config.ParseMemory(f.Disk); err != nil {
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
