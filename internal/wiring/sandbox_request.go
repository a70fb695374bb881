package wiring

import (
	"cmp"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/store"
)

// SandboxRequest is the sandbox `agentbox run` and `chat` are asked for
// (--memory, --cpus, --disk, --image, --isolation), as typed; empty
// fields take the configured defaults.
type SandboxRequest struct {
	// Memory, CPUs and Disk are limits as typed (SandboxFlags).
	Memory, CPUs, Disk string
	// Image is the sandbox image, one AGENTBOX_IMAGES allows; "" for the default.
	Image string
	// Isolation is the sandbox's tier; "" for AGENTBOX_ISOLATION's.
	Isolation string
}

// Spec is the sandbox r asks for, checked as a job's is: the limits
// parsed and within cfg's ceilings, the image one cfg allows, the tier
// one agentbox knows (the driver refuses, with
// sandbox.ErrIsolationUnavailable, one that cannot run here). The
// workspace and the environment are left to the caller.
func (r SandboxRequest) Spec(cfg config.Config) (sandbox.Spec, error) {
	l, err := r.limits()
	if err != nil {
		return sandbox.Spec{}, err
	}
	if err := jobs.CheckCeilings(store.Limits{MemoryBytes: l.MemoryBytes, NanoCPUs: l.NanoCPUs, DiskBytes: l.DiskBytes}, cfg.Sandbox.Ceilings); err != nil {
		return sandbox.Spec{}, err
	}
	image, err := jobs.CheckImage(r.Image, cfg.Sandbox.AllowedImages())
	if err != nil {
		return sandbox.Spec{}, err
	}
	iso := cmp.Or(r.Isolation, cfg.Sandbox.Isolation, sandbox.IsolationContainer)
	if err := sandbox.CheckIsolation(iso); err != nil {
		return sandbox.Spec{}, err
	}
	return sandbox.Spec{Image: image, Isolation: iso, Limits: l}, nil
}

// limits parses the resource limits.
func (r SandboxRequest) limits() (sandbox.Limits, error) {
	return SandboxFlags{Memory: r.Memory, CPUs: r.CPUs, Disk: r.Disk, Timeout: time.Minute}.limits()
}
