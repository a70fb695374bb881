package wiring

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// Scratch is a fresh sandbox for one command on a driver of its own, as
// `agentbox exec` uses it. Close removes the sandbox and closes the driver.
type Scratch struct {
	// ID is the sandbox's.
	ID string
	// Took is how long the sandbox took to answer once asked for.
	Took time.Duration
	sb   sandbox.Sandbox
	closers
}

// StoppedError is why the driver stopped a Scratch's sandbox (its disk
// quota, the host's free-space floor) while its command ran.
type StoppedError struct{ Err error }

func (e *StoppedError) Error() string { return e.Err.Error() }
func (e *StoppedError) Unwrap() error { return e.Err }

// NewScratch refuses spec's limits and the command's timeout over cfg's
// ceilings, as the API refuses a job's, fits the open-files limit to the
// processes asked for, and creates the sandbox. log receives the driver's
// warnings.
//
// With network.Proxy, the sandbox's only way out is an egress proxy of
// its own under network.Policy (as a job's is), which says each refused
// connection on network.Say as it happens.
func NewScratch(ctx context.Context, cfg config.Config, log *slog.Logger, spec sandbox.Spec, timeout time.Duration, network ScratchNetwork) (*Scratch, error) {
	if err := checkCeilings(cfg, log, &spec.Limits, timeout); err != nil {
		return nil, err
	}
	d, err := NewDriver(cfg, log, 1)
	if err != nil {
		return nil, err
	}
	s := &Scratch{}
	s.add(d.Close)
	caps, err := tierCaps(ctx, d, spec.Isolation)
	if err != nil {
		s.Close()
		return nil, err
	}
	if err := caps.CheckNetwork(spec.Network); err != nil {
		s.Close()
		return nil, fmt.Errorf("--network: %w", err)
	}
	b := sandbox.BindingOf(spec) // a person's command: bound as it is made
	var proxy *LocalEgress
	if network.Proxy {
		env, err := func() (map[string]string, error) {
			if proxy, err = NewLocalEgress(cfg, "exec", network.Policy, network.Say, log); err != nil {
				return nil, err
			}
			return proxy.Prepare()
		}()
		if err != nil {
			s.Close()
			return nil, err
		}
		maps.Copy(env, b.Env) // the person's own -e wins
		b.Env = env
	}
	if spec.Image, err = scratchImage(ctx, cfg, log, spec.Image); err != nil {
		s.Close()
		return nil, err
	}
	begin := time.Now()
	if s.sb, err = sandbox.Start(ctx, d, spec, b); err != nil {
		s.Close()
		return nil, err
	}
	s.Took, s.ID = time.Since(begin), s.sb.Handle().ID
	s.add(func() error { return s.sb.Destroy(context.WithoutCancel(ctx)) })
	if proxy != nil {
		if err := proxy.Start(ctx, s.sb.Guest()); err != nil {
			s.Close()
			return nil, err
		}
		s.add(proxy.Stop)
	}
	return s, nil
}

// ScratchNetwork is a Scratch's way out: none without Proxy (and then
// the container network the spec names, if any), else its own egress
// proxy under Policy (checked), saying each refusal on Say (nil: not
// said).
type ScratchNetwork struct {
	Proxy  bool
	Policy egress.Policy
	Say    io.Writer
}

// Command is the request to run args, killed after timeout: a single
// argument is a bash command line, several are an argv.
func Command(args []string, timeout time.Duration) guest.ExecRequest {
	req := guest.ExecRequest{Cmd: args}
	if len(args) == 1 {
		req = guest.Shell(args[0])
	}
	req.TimeoutMS = timeout.Milliseconds()
	return req
}

// Exec runs req on the sandbox's guest, writing its output as it comes,
// while a watchdog checks that the guest still answers. The error is a
// *StoppedError if the driver stopped the sandbox, wraps
// ErrStoppedAnswering if the watchdog gave up on the guest, and is
// otherwise the stream's.
func (s *Scratch) Exec(ctx context.Context, req guest.ExecRequest, stdout, stderr io.Writer) (guest.ExecResult, error) {
	var res guest.ExecResult
	err := s.watched(ctx, func(ctx context.Context, g *guest.Client) error {
		var err error
		res, err = g.ExecStream(ctx, req, func(stream string, p []byte) {
			if stream == "stderr" {
				stderr.Write(p)
			} else {
				stdout.Write(p)
			}
		})
		return err
	})
	return res, err
}

// Attach runs req attached to aio (guest.Client.ExecAttach: stdin, a
// terminal, output streamed uncapped) under the same watchdog as Exec,
// with the same errors.
func (s *Scratch) Attach(ctx context.Context, req guest.AttachRequest, aio guest.AttachIO) (guest.ExecResult, error) {
	var res guest.ExecResult
	err := s.watched(ctx, func(ctx context.Context, g *guest.Client) error {
		var err error
		res, err = g.ExecAttach(ctx, req, aio)
		return err
	})
	return res, err
}

// watched runs call while a watchdog checks that the guest still
// answers, and says why the driver stopped the sandbox if it did.
func (s *Scratch) watched(ctx context.Context, call func(context.Context, *guest.Client) error) error {
	g := s.sb.Guest()
	health := func(ctx context.Context) error {
		_, err := g.Health(ctx)
		return err
	}
	err := execWatch.watched(ctx, health, func(ctx context.Context) error { return call(ctx, g) })
	if st, ok := s.sb.(sandbox.Stopper); ok {
		if why := st.Stopped(); why != nil {
			return &StoppedError{why}
		}
	}
	return err
}

// tierCaps are the capabilities of the tier iso ("" for the default) of
// d, refused with sandbox.ErrIsolationUnavailable when it cannot run here.
func tierCaps(ctx context.Context, d Driver, iso string) (sandbox.Capabilities, error) {
	t, ok := d.(interface {
		Tier(ctx context.Context, iso string) (sandbox.Driver, error)
	})
	if !ok {
		if iso != "" && iso != d.Capabilities().Isolation {
			return sandbox.Capabilities{}, fmt.Errorf("%w: the %s driver runs %s sandboxes only", sandbox.ErrIsolationUnavailable, "sandbox", d.Capabilities().Isolation)
		}
		return d.Capabilities(), nil
	}
	td, err := t.Tier(ctx, iso)
	if err != nil {
		return sandbox.Capabilities{}, err
	}
	return td.Capabilities(), nil
}
