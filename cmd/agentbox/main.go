// Command agentbox runs autonomous coding agents in locked-down sandboxes.
// One static binary: the server, the CLI clients, the image builder, the
// doctor, and the guest daemon that runs inside every sandbox.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/docker/docker/client"
	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/sandbox/drivers"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// app carries what every subcommand needs: the parsed configuration and a logger.
type app struct {
	cfg config.Config
	// flagCfg holds values given as flags; commands apply them over cfg,
	// those flagSet reports as given.
	flagCfg config.Config
	flagSet func(name string) bool
	log     *slog.Logger
}

// dockerClient connects to the engine named by the configuration.
func (a *app) dockerClient() (*client.Client, error) {
	opts := []client.Opt{client.WithAPIVersionNegotiation()}
	if a.cfg.Docker.Host != "" {
		opts = append(opts, client.WithHost(a.cfg.Docker.Host))
	} else {
		opts = append(opts, client.WithHostFromEnv())
	}
	c, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return c, nil
}

// newDriver returns the sandbox driver configured by a.cfg, for one
// sandbox at a time.
func (a *app) newDriver() (sandbox.Driver, error) { return a.newDriverFor(1) }

// newDriverFor returns the driver named by --driver or AGENTBOX_DRIVER, for
// concurrency sandboxes at once: their processes' open files are bounded so
// that together they stay well within the host's file table.
func (a *app) newDriverFor(concurrency int) (sandbox.Driver, error) {
	sb := a.cfg.Sandbox
	nofile, err := a.fitNoFile(concurrency, sb.PidsLimit)
	if err != nil {
		return nil, err
	}
	if err := a.ensureFileTable(concurrency); err != nil {
		return nil, err
	}
	name := sb.Driver
	if a.flagCfg.Sandbox.Driver != "" {
		name = a.flagCfg.Sandbox.Driver
	}
	return drivers.Open(name, drivers.Options{Docker: docker.Config{
		Host:  a.cfg.Docker.Host,
		Image: sb.Image,
		Defaults: sandbox.Limits{MemoryBytes: sb.MemoryBytes, NanoCPUs: sb.NanoCPUs, PidsLimit: sb.PidsLimit,
			DiskBytes: sb.DiskBytes, NoFile: nofile},
		Network:      sb.Network,
		GuestBinary:  sb.GuestBinary,
		StateDir:     filepath.Join(a.cfg.DataDir, "sandboxes"),
		Instance:     sb.Instance,
		Display:      sandbox.Display{Width: sb.DisplayWidth, Height: sb.DisplayHeight},
		UIDs:         sb.UIDs,
		MinFreeBytes: sb.MinFreeDisk,
		Transport:    sb.GuestTransport,
		Log:          a.log,
	}})
}

// driverFlag adds --driver to a command that creates sandboxes; it wins
// over AGENTBOX_DRIVER.
func (a *app) driverFlag(cmd *cobra.Command) {
	cmd.Flags().StringVar(&a.flagCfg.Sandbox.Driver, "driver", "", "sandbox driver: "+strings.Join(drivers.Names(), ", ")+" (AGENTBOX_DRIVER; default "+drivers.Default+")")
}

// ensureFileTable makes sure the host's file table outlasts what
// concurrency sandboxes at the memory ceiling can hold open: a file mapped
// and closed stays open past RLIMIT_NOFILE, bounded only by the sandbox's
// memory. As root it raises fs.file-max (as systemd does at boot: the
// limit then is memory, charged to each sandbox); otherwise it refuses,
// naming the command.
func (a *app) ensureFileTable(concurrency int) error {
	fileMax, err := config.HostFileMax()
	if err != nil {
		return nil // not Linux's /proc: nothing to check
	}
	need := config.FileTableNeed(concurrency, a.cfg.Sandbox.Ceilings.MemoryBytes)
	if fileMax >= need {
		return nil
	}
	why := fmt.Sprintf("%d sandboxes at the %s memory ceiling could hold %d files open (one per %d bytes of memory, by mapping them), over half of fs.file-max (%d)",
		max(concurrency, 1), config.SizeText(a.cfg.Sandbox.Ceilings.MemoryBytes), need/2, config.FileBytes, fileMax)
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s: raise it as root: sysctl -w fs.file-max=%d (or lower AGENTBOX_CEILING_MEMORY or the concurrency)", why, need)
	}
	if err := os.WriteFile("/proc/sys/fs/file-max", []byte(strconv.FormatInt(need, 10)), 0); err != nil {
		return fmt.Errorf("%s, and raising it failed: %w", why, err)
	}
	a.log.Warn("raised fs.file-max so that sandboxes cannot fill the host's file table; make it permanent in /etc/sysctl.d (scripts/setup.sh does)",
		"from", fileMax, "to", need)
	return nil
}

// fitNoFile is the open-files limit of sandbox processes when concurrency
// sandboxes of pids processes run at once: the configured one, or lower
// (with a warning) when that could fill the host's file table.
func (a *app) fitNoFile(concurrency int, pids int64) (int64, error) {
	want := a.cfg.Sandbox.NoFile
	fileMax, err := config.HostFileMax()
	if err != nil {
		return want, nil // not Linux's /proc: nothing to fit against
	}
	got, err := config.FitFiles(fileMax, concurrency, pids, want)
	if err != nil {
		return 0, err
	}
	if got < want {
		a.log.Warn("open files per sandbox process lowered to fit the host's file table",
			"configured", want, "used", got, "fs.file-max", fileMax, "concurrency", concurrency, "pids", pids)
	}
	return got, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "agentbox:", err)
		os.Exit(1)
	}
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
AGENTBOX_SANDBOX_PIDS, DOCKER_HOST, ...); see docs/configuration.md.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.FromEnv()
			if err != nil {
				return fmt.Errorf("configuration: %w", err)
			}
			a.cfg = cfg
			return nil
		},
	}
	root.AddCommand(
		newGuestCmd(),
		newImageCmd(a),
		newExecCmd(a),
		newDoctorCmd(a),
		newBenchCmd(a),
		newServeCmd(a),
		newRunCmd(a),
		newChatCmd(a),
	)
	root.AddCommand(newClientCmds(a)...)
	return root
}
