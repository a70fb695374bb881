// Command agentbox runs autonomous coding agents in locked-down sandboxes.
// One static binary: the server, the CLI clients, the image builder, the
// doctor, and the guest daemon that runs inside every sandbox.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/drivers"
	"github.com/agentbox/agentbox/internal/wiring"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// app carries what every subcommand needs: the parsed configuration and a
// logger. What the commands run is assembled by internal/wiring.
type app struct {
	cfg config.Config
	// flagCfg holds values given as flags; commands apply them over cfg.
	flagCfg config.Config
	log     *slog.Logger
}

// driverFlag adds --driver to a command that creates sandboxes.
func (a *app) driverFlag(cmd *cobra.Command) {
	cmd.Flags().StringVar(&a.flagCfg.Sandbox.Driver, "driver", "", config.Lookup("AGENTBOX_DRIVER").Usage("sandbox driver: "+strings.Join(drivers.Names(), ", ")))
}

// dataDirFlag adds --data-dir to a command that reads or writes the
// data directory: where run and chat keep their work, and whose token
// file a client command sends to a local server.
func (a *app) dataDirFlag(cmd *cobra.Command, usage string) {
	cmd.Flags().StringVar(&a.flagCfg.DataDir, "data-dir", "", usage+" (AGENTBOX_DATA_DIR; default ~/.local/share/agentbox)")
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals()...)
	cmd, err := newRootCmd().ExecuteContextC(ctx)
	stop()
	if code := report(os.Stderr, cmd, err); code != 0 {
		os.Exit(code)
	}
}

// report prints how the command cmd failed with err, if it did, and
// returns the exit status: a usage error is shown with the command's
// usage line.
func report(w io.Writer, cmd *cobra.Command, err error) int {
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// An error may quote what a sandbox wrote (a file name, a link's
	// target): its controls are shown, never acted on.
	v := render.NewVisible(w)
	fmt.Fprintln(v, "agentbox:", err)
	v.Close()
	var ue usageError
	if errors.As(err, &ue) && cmd != nil {
		line := cmd.UseLine()
		if cmd.HasAvailableSubCommands() {
			line = cmd.CommandPath() + " COMMAND"
		}
		fmt.Fprintf(w, "usage: %s\nRun '%s --help' for more.\n", line, cmd.CommandPath())
	}
	return exitCodeOf(err)
}

// stopSignals are the signals that end a command the way Ctrl-C does:
// cleanly, its sandboxes removed and its session saved. A closed terminal
// (SIGHUP) is one, unless the process was started to ignore it (nohup),
// which catching it would undo.
func stopSignals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

// exitError ends the process with a specific code without printing anything
// more (the command already said what went wrong).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitWith is err, or else the exit status code as an exitError (nil for 0).
func exitWith(code int, err error) error {
	if err == nil && code != 0 {
		return exitError{code}
	}
	return err
}

func newRootCmd() *cobra.Command {
	a := &app{log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	root := &cobra.Command{
		Use:   "agentbox",
		Short: "Run autonomous coding agents in locked-down sandboxes",
		Long: `agentbox runs coding agents in isolated sandboxes: a language model calls
tools (shell, files, code execution) that execute inside a locked-down
container with no network, no root and hard resource limits.

Configuration comes from flags and the environment (AGENTBOX_DATA_DIR,
AGENTBOX_IMAGE, AGENTBOX_SANDBOX_MEMORY, AGENTBOX_SANDBOX_CPUS,
AGENTBOX_SANDBOX_PIDS, DOCKER_HOST, ...); see docs/configuration.md.

Exit status, on every command:
  0    it did what was asked (a job completed)
  1    it failed: a job ended in error, the server refused a request,
       doctor or image inspect found a problem
  2    a usage error (an unknown flag or command, a wrong number of
       arguments, a bad value in a flag or the environment, a request
       the server finds invalid), or a request this host or server
       cannot serve as asked (an isolation tier missing, a network
       policy not allowed)
  130  interrupted (Ctrl-C), or for run and chat, the job was canceled
exec exits with its command's own status, like docker run (3 when
--max-output cut its output; exec --help lists the rest).`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.FromEnv()
			if err == nil {
				err = wiring.CheckConfig(cfg)
			}
			if err != nil {
				return fmt.Errorf("%w: %w", errConfiguration, err)
			}
			if d := a.flagCfg.Sandbox.Driver; d != "" {
				cfg.Sandbox.Driver = d // --driver wins over AGENTBOX_DRIVER
			}
			if d := a.flagCfg.DataDir; d != "" {
				if cfg.DataDir, err = filepath.Abs(d); err != nil {
					return fmt.Errorf("--data-dir %s: %w", d, err)
				}
			}
			a.cfg = cfg
			return nil
		},
	}
	root.AddCommand(
		newGuestCmd(),
		newHighlightCmd(),
		newImageCmd(a),
		newExecCmd(a),
		newDoctorCmd(a),
		newBenchCmd(a),
		newServeCmd(a),
		newRunCmd(a),
		newChatCmd(a),
		newVersionCmd(),
	)
	root.AddCommand(newClientCmds(a)...)
	root.SetVersionTemplate(versionText())
	root.SetFlagErrorFunc(flagError)
	// A command that groups others runs nothing of its own (checkUsage
	// makes it print its help): its usage is its commands'.
	root.SetUsageTemplate(strings.Replace(root.UsageTemplate(), "{{if .Runnable}}", "{{if and .Runnable (not .HasAvailableSubCommands)}}", 1))
	// help and completion are made now, not as the root runs, so that
	// checkUsage covers them too.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	checkUsage(root)
	return root
}

// versionText is what --version prints: what `agentbox version` does.
func versionText() string {
	var sb strings.Builder
	_ = printVersion(&sb)
	return sb.String()
}

// isolationUsage is the help of --isolation on exec, run and submit.
const isolationUsage = "isolation tier: container, gvisor (gVisor's runsc) or microvm (default AGENTBOX_ISOLATION, else container); one that cannot run here is refused (exit 2), never replaced"

// errConfiguration marks a configuration that does not parse or hold (a
// bad value in the environment or a flag): a usage error, exit 2, though
// the command line itself may be right.
var errConfiguration = errors.New("configuration")

// exitCodeOf is the exit status of a command that failed with err: 2 for
// a usage error or a bad configuration, a request the server found invalid (400, 422), or a
// request the host cannot serve as asked (an isolation tier missing here,
// locally or on the server; a network policy the operator does not allow,
// checked here), else 1.
func exitCodeOf(err error) int {
	var ue usageError
	var ce *client.Error
	switch {
	case errors.As(err, &ue), errors.Is(err, errConfiguration), errors.Is(err, sandbox.ErrIsolationUnavailable), errors.Is(err, jobs.ErrBadNetwork):
		return 2
	case errors.As(err, &ce) && (ce.StatusCode == http.StatusBadRequest || ce.StatusCode == http.StatusUnprocessableEntity):
		return 2
	}
	return 1
}
