package wiring

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/agentbox/agentbox/internal/bench"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
)

// BenchSandboxes runs measure with o set up for a sandbox benchmark
// (agentbox bench, bench gui, bench upload's baselines): the configured
// driver, closed afterwards, the sandbox image, and notes for o.Log.
func BenchSandboxes(cfg config.Config, log *slog.Logger, o *bench.Options, notes io.Writer, measure func() error) error {
	d, err := NewDriver(cfg, log, 1)
	if err != nil {
		return err
	}
	defer d.Close()
	o.Driver, o.Image, o.Log = d, cfg.Sandbox.Image, notes
	return measure()
}

// BenchTier sets o, which BenchSandboxes set up, to measure the tier
// isolation: the tier's driver, the runtime of the baselines' containers,
// and the driver of the other guest transport where that is measured
// (o.Log is told why not where it is not). head is the line that heads
// the results; closeAll closes what BenchTier opened.
func BenchTier(ctx context.Context, cfg config.Config, log *slog.Logger, o *bench.Options, isolation string) (head string, closeAll func(), err error) {
	closeAll = func() {}
	tiers, ok := o.Driver.(interface {
		Tier(ctx context.Context, iso string) (sandbox.Driver, error)
	})
	if !ok {
		return "", closeAll, fmt.Errorf("%w: the %s driver has no tiers to choose from", sandbox.ErrIsolationUnavailable, cfg.Sandbox.Driver)
	}
	d, err := tiers.Tier(ctx, isolation)
	if err != nil {
		return "", closeAll, err
	}
	o.Driver = d
	switch isolation {
	case sandbox.IsolationGVisor:
		o.Runtime = docker.RuntimeGVisor
		fmt.Fprintln(o.Log, "the other guest transport is not measured: gvisor sandboxes have no network the host reaches")
	case sandbox.IsolationMicroVM:
		fmt.Fprintln(o.Log, "the other guest transport is not measured: a microVM's guest is reached over its virtio-serial port only")
	default:
		if alt, err := altTransportDriver(cfg, log, d); err != nil {
			fmt.Fprintf(o.Log, "the other guest transport is not measured: %v\n", err)
		} else {
			closeAll = func() { alt.Close() }
			o.AltDriver = alt
		}
	}
	head, err = benchHead(ctx, d, o.Runtime)
	return head, closeAll, err
}

// benchHead says what the sandboxes of d and the baselines' containers
// (under runtime) run on.
func benchHead(ctx context.Context, d sandbox.Driver, runtime string) (string, error) {
	vm, ok := d.(interface {
		Accel(context.Context) (string, error)
	})
	if !ok {
		return fmt.Sprintf("Isolation %s: sandboxes and baseline containers under the %s runtime.", d.Capabilities().Isolation, cmp.Or(runtime, "engine's default")), nil
	}
	accel, err := vm.Accel(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Isolation microvm: sandboxes are QEMU VMs (accel %s); baseline containers under the engine's default runtime.", accel), nil
}

// altTransportDriver is the configured driver with the other guest
// transport than d's: TCP beside the unix socket, or the unix socket
// beside TCP.
func altTransportDriver(cfg config.Config, log *slog.Logger, d sandbox.Driver) (sandbox.Driver, error) {
	cfg.Sandbox.GuestTransport = sandbox.TransportTCP
	if d.Capabilities().Transport == sandbox.TransportTCP {
		cfg.Sandbox.GuestTransport = sandbox.TransportUnix
	}
	return NewDriver(cfg, log, 1)
}
