package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/wiring"
)

// execFlags are the options of `agentbox exec`.
type execFlags struct {
	wiring.SandboxFlags
	quiet, raw bool
	// network is --network as typed; egress the other network flags.
	network string
	egress  wiring.NetworkFlags
}

func newExecCmd(a *app) *cobra.Command {
	var f execFlags
	cmd := &cobra.Command{
		Use:   "exec [flags] COMMAND [ARG...]",
		Short: "Run one command in a fresh sandbox, stream its output, then remove the sandbox",
		Long: `exec creates a fresh sandbox (no network, no root, resource limits), runs
one command in /workspace, streams its output as it is produced, removes the
sandbox and exits with the command's exit code — like 'docker run --rm', with
agentbox's lock-down.

A single argument is run as a bash command line; several are run as an argv.
Use --workspace to mount a host directory (it is kept); otherwise a scratch
workspace is made and removed. Ctrl-C kills the command and removes the sandbox
(exit 130). A sandbox that stops answering (its guest frozen or gone) is given
up on within seconds and removed (exit 1).

What the command prints is the sandbox's: on a terminal its control
characters and escape sequences but colours are shown (as ^[, ^G, ^M,
<U+009B>) instead of acting, so it cannot set the clipboard or the title,
clear the screen or write over a line; progress bars drawn with a carriage
return show it as ^M. --raw passes the bytes as 'docker exec' does (for a
command you trust); a pipe or a file always gets them unchanged.

--network bridge (or a named network) gives the sandbox a container network
of its own instead, as 'docker run --network' does, outside the proxy.` + networkHelp,
		Example: `  agentbox exec 'python3 -c "print(6*7)"'
  agentbox exec --memory 512m --timeout 30s -- python3 script.py
  agentbox exec --workspace ./proj 'pytest -q'
  agentbox exec --preset python 'pip install flask'
  agentbox exec --allow example.com 'curl -sI https://example.com'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.execPolicy(&f); err != nil {
				return err
			}
			spec, err := f.Spec()
			if err != nil {
				return usage(err)
			}
			req := wiring.Command(args, f.Timeout)
			return exitWith(a.execOnce(cmd.Context(), spec, req, cmd.OutOrStdout(), cmd.ErrOrStderr(), f))
		},
	}
	fl := cmd.Flags()
	fl.Var(sizeVar(&f.Memory), "memory", "memory limit, e.g. 512m or 2g (default from AGENTBOX_SANDBOX_MEMORY, else 2g)")
	fl.Var(cpusVar(&f.CPUs), "cpus", "CPU limit, e.g. 0.5 or 2 (default from AGENTBOX_SANDBOX_CPUS, else 1)")
	fl.Int64Var(&f.Pids, "pids", 0, "process limit (default from AGENTBOX_SANDBOX_PIDS, else 512)")
	fl.Var(sizeVar(&f.Disk), "disk", "disk quota on what the sandbox writes to the host, workspace included, e.g. 1g (default from AGENTBOX_SANDBOX_DISK, else 10g)")
	fl.StringVar(&f.Isolation, "isolation", "", isolationUsage)
	fl.StringVar(&f.network, "network", "", "none (the default: no network), open (any public host through the egress proxy), or a container network: bridge or a named one; host is refused")
	addNetworkFlags(fl, &f.egress, false)
	fl.StringVar(&f.Workspace, "workspace", "", "host directory to mount at /workspace (kept afterwards)")
	fl.Var(durationVar(&f.Timeout, 10*time.Minute), "timeout", "kill the command and its children after this long")
	fl.StringArrayVarP(&f.Env, "env", "e", nil, "set an environment variable KEY=VALUE (repeatable)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print only the command's output")
	fl.BoolVar(&f.raw, "raw", false, "print the command's bytes as they are, escape sequences included, on a terminal too")
	a.driverFlag(cmd)
	a.dataDirFlag(cmd, "where sandboxes keep their state")
	return cmd
}

// execPolicy reads exec's network flags into f: the container network, or
// the egress policy checked against the operator's settings.
func (a *app) execPolicy(f *execFlags) error {
	container, err := execNetwork(f.network, &f.egress)
	if err != nil {
		return err
	}
	f.SandboxNetwork = container
	f.Network, err = f.egress.Policy(a.cfg.Egress.Policy)
	return err
}

// execOnce runs req in a fresh sandbox, streaming output, and returns the
// command's exit code. The sandbox is removed whatever happens.
func (a *app) execOnce(ctx context.Context, spec sandbox.Spec, req guest.ExecRequest, stdout, stderr io.Writer, f execFlags) (int, error) {
	timeout := time.Duration(req.TimeoutMS) * time.Millisecond
	network := wiring.ScratchNetwork{Proxy: f.SandboxNetwork == "" || f.SandboxNetwork == "none", Policy: f.Network}
	if !f.quiet {
		network.Say = stderr
	}
	s, err := wiring.NewScratch(ctx, a.cfg, a.log, spec, timeout, network)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err := s.Close(); err != nil {
			fmt.Fprintln(stderr, "agentbox: removing the sandbox:", err)
		}
	}()
	if !f.quiet {
		fmt.Fprintf(stderr, "agentbox: sandbox %s ready in %v\n", s.ID, s.Took.Round(time.Millisecond))
	}
	res, err := execShown(ctx, s, req, stdout, stderr, f.raw)
	var stopped *wiring.StoppedError
	switch {
	case errors.As(err, &stopped):
		fmt.Fprintf(stderr, "agentbox: %v\n", err)
		return 0, exitError{1}
	case errors.Is(err, wiring.ErrStoppedAnswering):
		// Said now: the deferred Close removes the sandbox before main could print it.
		fmt.Fprintf(stderr, "agentbox: %v; removing it\n", err)
		return 0, exitError{1}
	case err != nil && ctx.Err() != nil:
		return 130, nil // interrupted: the sandbox is removed by the deferred Close
	case err != nil:
		return 0, fmt.Errorf("exec: %w", err)
	}
	if !f.quiet {
		switch {
		case res.TimedOut:
			fmt.Fprintf(stderr, "agentbox: command timed out after %v and was killed\n", timeout)
		case res.OOMKilled:
			fmt.Fprintln(stderr, "agentbox: command was killed for running out of memory")
		case res.Truncated:
			fmt.Fprintln(stderr, "agentbox: output was capped")
		}
	}
	return res.ExitCode, nil
}

// execShown runs req, its output going to stdout and stderr through
// render.ForTerminal: a terminal sees its escape sequences, not their
// effects, unless raw.
func execShown(ctx context.Context, s *wiring.Scratch, req guest.ExecRequest, stdout, stderr io.Writer, raw bool) (guest.ExecResult, error) {
	out, errOut := render.ForTerminal(stdout, raw), render.ForTerminal(stderr, raw)
	res, err := s.Exec(ctx, req, out, errOut)
	return res, errors.Join(err, out.Close(), errOut.Close())
}
