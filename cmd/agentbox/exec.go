package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// execFlags are the options of `agentbox exec`.
type execFlags struct {
	memory, cpus, disk, network, workspace string
	pids                                   int64
	timeout                                time.Duration
	env                                    []string
	quiet                                  bool
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
up on within seconds and removed (exit 1).`,
		Example: `  agentbox exec 'python3 -c "print(6*7)"'
  agentbox exec --memory 512m --timeout 30s -- python3 script.py
  agentbox exec --workspace ./proj 'pytest -q'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := f.spec()
			if err != nil {
				return err
			}
			req := guest.ExecRequest{Cmd: args, TimeoutMS: f.timeout.Milliseconds()}
			if len(args) == 1 {
				req = guest.Shell(args[0])
				req.TimeoutMS = f.timeout.Milliseconds()
			}
			return exitWith(a.execOnce(cmd.Context(), spec, req, cmd.OutOrStdout(), cmd.ErrOrStderr(), f.quiet))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.memory, "memory", "", "memory limit, e.g. 512m or 2g (default from AGENTBOX_SANDBOX_MEMORY, else 2g)")
	fl.StringVar(&f.cpus, "cpus", "", "CPU limit, e.g. 0.5 or 2 (default from AGENTBOX_SANDBOX_CPUS, else 1)")
	fl.Int64Var(&f.pids, "pids", 0, "process limit (default from AGENTBOX_SANDBOX_PIDS, else 512)")
	fl.StringVar(&f.disk, "disk", "", "disk quota on what the sandbox writes to the host, workspace included, e.g. 1g (default from AGENTBOX_SANDBOX_DISK, else 10g)")
	fl.StringVar(&f.network, "network", "", "sandbox network: none (the default), bridge or a named network; host is refused")
	fl.StringVar(&f.workspace, "workspace", "", "host directory to mount at /workspace (kept afterwards)")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Minute, "kill the command and its children after this long")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "set an environment variable KEY=VALUE (repeatable)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print only the command's output")
	a.driverFlag(cmd)
	return cmd
}

func (f execFlags) spec() (sandbox.Spec, error) {
	var spec sandbox.Spec
	var err error
	if f.memory != "" {
		if spec.Limits.MemoryBytes, err = config.ParseMemory(f.memory); err != nil {
			return spec, fmt.Errorf("--memory: %w", err)
		}
	}
	if f.cpus != "" {
		if spec.Limits.NanoCPUs, err = config.ParseCPUs(f.cpus); err != nil {
			return spec, fmt.Errorf("--cpus: %w", err)
		}
	}
	if f.disk != "" {
		if spec.Limits.DiskBytes, err = config.ParseMemory(f.disk); err != nil {
			return spec, fmt.Errorf("--disk: %w", err)
		}
		if spec.Limits.DiskBytes < 64<<20 {
			return spec, errors.New("--disk: at least 64m")
		}
	}
	if f.pids < 0 || f.timeout <= 0 {
		return spec, errors.New("--pids must not be negative and --timeout must be positive")
	}
	spec.Limits.PidsLimit = f.pids
	spec.Network = f.network
	if f.workspace != "" {
		fi, err := os.Stat(f.workspace)
		if err != nil || !fi.IsDir() {
			return spec, fmt.Errorf("--workspace %s: not a directory", f.workspace)
		}
		if spec.WorkspaceDir, err = absPath(f.workspace); err != nil {
			return spec, err
		}
	}
	spec.Env = map[string]string{}
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return spec, fmt.Errorf("--env %q: want KEY=VALUE", kv)
		}
		spec.Env[k] = v
	}
	return spec, nil
}

// execOnce runs req in a fresh sandbox, streaming output, and returns the
// command's exit code. The sandbox is removed whatever happens.
func (a *app) execOnce(ctx context.Context, spec sandbox.Spec, req guest.ExecRequest, stdout, stderr io.Writer, quiet bool) (int, error) {
	if err := a.checkCeilings(&spec.Limits, time.Duration(req.TimeoutMS)*time.Millisecond); err != nil {
		return 0, err
	}
	d, err := a.newDriver()
	if err != nil {
		return 0, err
	}
	defer d.Close()
	if err := d.Capabilities().CheckNetwork(spec.Network); err != nil {
		return 0, fmt.Errorf("--network: %w", err)
	}
	begin := time.Now()
	s, err := d.Create(ctx, spec)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err := s.Destroy(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintln(stderr, "agentbox: removing the sandbox:", err)
		}
	}()
	if !quiet {
		fmt.Fprintf(stderr, "agentbox: sandbox %s ready in %v\n", s.Handle().ID, time.Since(begin).Round(time.Millisecond))
	}
	res, err := streamWatched(ctx, s, req, stdout, stderr)
	if why := stoppedBy(s); why != nil {
		fmt.Fprintf(stderr, "agentbox: %v\n", why)
		return 0, exitError{1}
	}
	switch {
	case errors.Is(err, errStoppedAnswering):
		// Said now: the deferred Destroy runs before main could print it.
		fmt.Fprintf(stderr, "agentbox: %v; removing it\n", err)
		return 0, exitError{1}
	case err != nil && ctx.Err() != nil:
		return 130, nil // interrupted: the sandbox is removed by the deferred Destroy
	case err != nil:
		return 0, fmt.Errorf("exec: %w", err)
	}
	if !quiet {
		switch {
		case res.TimedOut:
			fmt.Fprintf(stderr, "agentbox: command timed out after %v and was killed\n", time.Duration(req.TimeoutMS)*time.Millisecond)
		case res.OOMKilled:
			fmt.Fprintln(stderr, "agentbox: command was killed for running out of memory")
		case res.Truncated:
			fmt.Fprintln(stderr, "agentbox: output was capped")
		}
	}
	return res.ExitCode, nil
}

// streamWatched runs req on s's guest, writing its output as it comes, while
// a watchdog checks that the guest still answers: a frozen guest would leave
// the stream waiting until the command's timeout plus a minute. It returns
// an error wrapping errStoppedAnswering if the watchdog gave up.
func streamWatched(ctx context.Context, s sandbox.Sandbox, req guest.ExecRequest, stdout, stderr io.Writer) (res guest.ExecResult, err error) {
	health := func(ctx context.Context) error {
		_, err := s.Guest().Health(ctx)
		return err
	}
	err = execWatch.watched(ctx, health, func(ctx context.Context) error {
		var err error
		res, err = s.Guest().ExecStream(ctx, req, func(stream string, p []byte) {
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
