package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentbox/agentbox/internal/units"
)

// Egress configures the egress proxy, a sandbox's only way out (issue 26):
// what jobs' policies are checked against, and the proxy's own bounds. The
// policy settings are kept as the environment states them; the egress
// package reads and checks them (egress.Load), where they are used.
type Egress struct {
	// Presets is the operator's presets file (AGENTBOX_EGRESS_PRESETS),
	// Secrets the secrets file (AGENTBOX_EGRESS_SECRETS), Modes the modes
	// jobs may ask for (AGENTBOX_EGRESS_MODES) and Default the policy of a
	// job that states none (AGENTBOX_EGRESS_DEFAULT).
	Presets, Secrets, Modes, Default string
	// AllowPrivate are the private, loopback or link-local ranges the proxy
	// connects to after all (AGENTBOX_EGRESS_ALLOW_PRIVATE): a private
	// package mirror's.
	AllowPrivate string
	// Resolve pins names to addresses, like curl's --resolve
	// (AGENTBOX_EGRESS_RESOLVE): the proxy uses these instead of DNS.
	Resolve string
	// CA is a PEM file of certificate authorities the proxy trusts, and
	// every sandbox's trust bundle holds, besides the system's
	// (AGENTBOX_EGRESS_CA).
	CA string
	// Bytes is a job's bound on the bytes its sandbox moves through the
	// proxy, in and out together, when it sets no limits.egress
	// (AGENTBOX_EGRESS_BYTES, default 10 GiB).
	Bytes int64
	// Conns bounds a job's concurrent connections (AGENTBOX_EGRESS_CONNS,
	// default 64).
	Conns int
	// Idle is how long a connection may carry nothing before the proxy
	// closes it (AGENTBOX_EGRESS_IDLE, default 2m).
	Idle time.Duration
}

// Validate checks the egress bounds.
func (e Egress) Validate() error {
	var errs []error
	if e.Bytes < 1<<20 {
		errs = append(errs, fmt.Errorf("egress bytes %s: at least 1MiB (AGENTBOX_EGRESS_BYTES)", units.FormatSize(e.Bytes)))
	}
	if e.Conns < 1 || e.Conns > 4096 {
		errs = append(errs, fmt.Errorf("egress connections %d: want 1 to 4096 (AGENTBOX_EGRESS_CONNS)", e.Conns))
	}
	if e.Idle < time.Second {
		errs = append(errs, fmt.Errorf("egress idle %v: at least 1s (AGENTBOX_EGRESS_IDLE)", e.Idle))
	}
	return errors.Join(errs...)
}
