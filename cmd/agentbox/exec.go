package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/wiring"
)

// execFlags are the options of `agentbox exec`.
type execFlags struct {
	wiring.SandboxFlags
	quiet, raw bool
	// interactive is -i; tty is -t; maxOutput is --max-output as typed.
	interactive, tty bool
	maxOutput        string
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

Stdin is the command's, as with 'docker run -i': when it is not a terminal
(echo hi | agentbox exec cat) it is forwarded automatically, and its end
closes the command's stdin; -i forwards a terminal's too; -i=false keeps
stdin out (the command reads /dev/null). -t gives the command a
pseudo-terminal in the sandbox (colours, REPLs, vi, less): the local terminal
is put in raw mode for the command's whole run (Ctrl-C goes to the command),
follows its window size, and is restored on exit; with -t, stdin is
forwarded when it is a terminal, and the output is passed as it is (--raw).

What the command prints is the sandbox's: on a terminal its control
characters and escape sequences but colours are shown (as ^[, ^G, ^M,
<U+009B>) instead of acting, so it cannot set the clipboard or the title,
clear the screen or write over a line; progress bars drawn with a carriage
return show it as ^M. --raw passes the bytes as 'docker exec' does (for a
command you trust); a pipe or a file always gets them unchanged.

Output is streamed, never buffered, and never cut silently. --max-output
caps each of stdout and stderr: past it the command is stopped, what came
before the cap is kept byte for byte, and exec says so on stderr and exits 3.
With no --max-output there is no cap when stdout is a file or a pipe, or
with -t; on a terminal the cap is 10 MiB. --max-output 0 means no cap.

Exit status, as 'docker run': the command's own; 128+N when signal N ended
it (137: killed at --timeout or for running out of memory); 126 when it
could not be run, 127 when it was not found; and from agentbox itself:
1 when the sandbox could not be made, stopped answering or was stopped;
2 for a usage error; 3 when the output was cut (at --max-output, or
output of processes the command left running, still coming 30s after it
ended); 130 when interrupted (Ctrl-C).

--network bridge (or a named network) gives the sandbox a container network
of its own instead, as 'docker run --network' does, outside the proxy.` + networkHelp,
		Example: `  agentbox exec 'python3 -c "print(6*7)"'
  echo hello | agentbox exec cat
  agentbox exec -t python3
  agentbox exec --max-output 1m 'cat big.log' > head.log
  agentbox exec --memory 512m --timeout 30s -- python3 script.py
  agentbox exec --workspace ./proj 'pytest -q'
  agentbox exec --preset python 'pip install flask'
  agentbox exec --allow example.com 'curl -sI https://example.com'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := wiring.EgressPolicy(a.cfg)
			if err != nil {
				return err
			}
			if err := f.SetNetwork(f.network, f.egress, c); err != nil {
				return err
			}
			spec, err := f.Spec()
			if err != nil {
				return usage(err)
			}
			st, err := wiring.NewExecStreams(cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), wiring.StreamFlags{TTY: f.tty, Raw: f.raw,
				Interactive: f.interactive, InteractiveSet: cmd.Flags().Changed("interactive"), Env: f.Env, MaxOutput: f.maxOutput})
			if err != nil { // a flag's value: a usage error
				fmt.Fprintln(cmd.ErrOrStderr(), "agentbox:", err)
				return exitError{2}
			}
			req := wiring.Command(args, f.Timeout)
			network := wiring.ScratchNetwork{Proxy: f.SandboxNetwork == "" || f.SandboxNetwork == "none", Policy: f.Network}
			return exitWith(wiring.Exec(cmd.Context(), a.cfg, a.log, wiring.ExecRequest{Spec: spec, Command: req, Network: network, Quiet: f.quiet, Attach: st.Run}, st.Stderr))
		},
	}
	fl := cmd.Flags()
	fl.Var(sizeVar(&f.Memory), "memory", "memory limit, e.g. 512m or 2g (default from "+config.Lookup("AGENTBOX_SANDBOX_MEMORY").Fallback()+")")
	fl.Var(cpusVar(&f.CPUs), "cpus", "CPU limit, e.g. 0.5 or 2 (default from "+config.Lookup("AGENTBOX_SANDBOX_CPUS").Fallback()+")")
	fl.Int64Var(&f.Pids, "pids", 0, "process limit (default from "+config.Lookup("AGENTBOX_SANDBOX_PIDS").Fallback()+")")
	fl.Var(sizeVar(&f.Disk), "disk", "disk quota on what the sandbox writes to the host, workspace included, e.g. 1g (default from "+config.Lookup("AGENTBOX_SANDBOX_DISK").Fallback()+")")
	fl.StringVar(&f.Isolation, "isolation", "", isolationUsage)
	fl.StringVar(&f.network, "network", "", "none (the default: no network), open (any public host through the egress proxy), or a container network: bridge or a named one; host is refused")
	addNetworkFlags(fl, &f.egress, false)
	fl.StringVar(&f.Workspace, "workspace", "", "host directory to mount at /workspace (kept afterwards)")
	fl.Var(durationVar(&f.Timeout, 10*time.Minute), "timeout", "kill the command and its children after this long")
	fl.StringArrayVarP(&f.Env, "env", "e", nil, "set an environment variable KEY=VALUE (repeatable)")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "print only the command's output")
	fl.BoolVar(&f.raw, "raw", false, "print the command's bytes as they are, escape sequences included, on a terminal too")
	fl.BoolVarP(&f.interactive, "interactive", "i", false, "forward stdin to the command (the default when stdin is not a terminal; -i=false keeps it out)")
	fl.BoolVarP(&f.tty, "tty", "t", false, "run the command on a pseudo-terminal in the sandbox, the local terminal in raw mode")
	fl.Var(sizeVar(&f.maxOutput), "max-output", "stop the command once stdout or stderr passes SIZE (e.g. 10m) and exit 3; 0 for no cap (default: none to a file, a pipe or with -t; 10m on a terminal)")
	a.driverFlag(cmd)
	a.dataDirFlag(cmd, "where sandboxes keep their state")
	return cmd
}
