package wiring

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/docker/docker/client"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/diskusage"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/sandbox/drivers"
	"github.com/agentbox/agentbox/internal/sandbox/microvm"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/units"
)

// Driver is a sandbox driver; whoever opened it closes it.
type Driver = sandbox.Driver

// NewDriver returns the sandbox driver cfg configures, for concurrency
// sandboxes at once: their processes' open files are bounded so that
// together they stay well within the host's file table. log receives its
// warnings. It is the one place a driver is made: the one
// cfg.Sandbox.Driver names (AGENTBOX_DRIVER, --driver), through drivers.Open.
func NewDriver(cfg config.Config, log *slog.Logger, concurrency int) (Driver, error) {
	sb := cfg.Sandbox
	nofile, err := fitNoFile(cfg, log, concurrency, sb.PidsLimit)
	if err != nil {
		return nil, err
	}
	if err := ensureFileTable(cfg, log, concurrency); err != nil {
		return nil, err
	}
	defaults := sandbox.Limits{MemoryBytes: sb.MemoryBytes, NanoCPUs: sb.NanoCPUs, PidsLimit: sb.PidsLimit,
		DiskBytes: sb.DiskBytes, NoFile: nofile}
	display := sandbox.Display{Width: sb.DisplayWidth, Height: sb.DisplayHeight}
	return drivers.Open(sb.Driver, drivers.Options{Isolation: sb.Isolation, Docker: docker.Config{
		Host:          cfg.Docker.Host,
		Image:         sb.Image,
		Defaults:      defaults,
		Network:       sb.Network,
		GuestBinary:   sb.GuestBinary,
		StateDir:      filepath.Join(cfg.DataDir, "sandboxes"),
		Instance:      sb.Instance,
		Display:       display,
		UIDs:          sb.UIDs,
		MinFreeBytes:  sb.MinFreeDisk,
		MinFreeInodes: sb.MinFreeInodes,
		Transport:     sb.GuestTransport,
		Log:           log,
	}, MicroVM: microvm.DriverConfig{
		StateDir:    filepath.Join(cfg.DataDir, "microvm"),
		Image:       sb.Image,
		GuestBinary: sb.GuestBinary,
		Defaults:    defaults,
		Display:     display,
		UIDs:        sb.UIDs,
		MinFree:     diskusage.Floor{Bytes: sb.MinFreeDisk, Inodes: sb.MinFreeInodes},
		Log:         log,
	}})
}

// DockerClient connects to the engine c names (DOCKER_HOST otherwise).
func DockerClient(c config.Docker) (*client.Client, error) {
	opts := []client.Opt{client.WithAPIVersionNegotiation()}
	if c.Host != "" {
		opts = append(opts, client.WithHost(c.Host))
	} else {
		opts = append(opts, client.WithHostFromEnv())
	}
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return cli, nil
}

// ensureFileTable makes sure the host's file table outlasts what
// concurrency sandboxes at the memory ceiling can hold open: a file mapped
// and closed stays open past RLIMIT_NOFILE, bounded only by the sandbox's
// memory. As root it raises fs.file-max (as systemd does at boot: the
// limit then is memory, charged to each sandbox); otherwise it refuses,
// naming the command.
func ensureFileTable(cfg config.Config, log *slog.Logger, concurrency int) error {
	fileMax, err := config.HostFileMax()
	if err != nil {
		return nil // not Linux's /proc: nothing to check
	}
	ceiling := cfg.Sandbox.Ceilings.MemoryBytes
	need := config.FileTableNeed(concurrency, ceiling)
	if fileMax >= need {
		return nil
	}
	why := fmt.Sprintf("%d sandboxes at the %s memory ceiling could hold %d files open (one per %d bytes of memory, by mapping them), over half of fs.file-max (%d)",
		max(concurrency, 1), units.FormatSize(ceiling), need/2, config.FileBytes, fileMax)
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s: raise it as root: sysctl -w fs.file-max=%d (or lower AGENTBOX_CEILING_MEMORY or the concurrency)", why, need)
	}
	if err := os.WriteFile("/proc/sys/fs/file-max", []byte(strconv.FormatInt(need, 10)), 0); err != nil {
		return fmt.Errorf("%s, and raising it failed: %w", why, err)
	}
	log.Warn("raised fs.file-max so that sandboxes cannot fill the host's file table; make it permanent in /etc/sysctl.d (scripts/setup.sh does)",
		"from", fileMax, "to", need)
	return nil
}

// fitNoFile is the open-files limit of sandbox processes when concurrency
// sandboxes of pids processes run at once: the configured one, or lower
// (with a warning) when that could fill the host's file table.
func fitNoFile(cfg config.Config, log *slog.Logger, concurrency int, pids int64) (int64, error) {
	want := cfg.Sandbox.NoFile
	fileMax, err := config.HostFileMax()
	if err != nil {
		return want, nil // not Linux's /proc: nothing to fit against
	}
	got, err := config.FitFiles(fileMax, concurrency, pids, want)
	if err != nil {
		return 0, err
	}
	if got < want {
		log.Warn("open files per sandbox process lowered to fit the host's file table",
			"configured", want, "used", got, "fs.file-max", fileMax, "concurrency", concurrency, "pids", pids)
	}
	return got, nil
}

// checkCeilings refuses a command's limits over the operator's ceilings,
// as the API refuses a job's, and fits the open-files limit to the
// processes asked for.
func checkCeilings(cfg config.Config, log *slog.Logger, l *sandbox.Limits, timeout time.Duration) error {
	c := cfg.Sandbox.Ceilings
	err := jobs.CheckCeilings(store.Limits{MemoryBytes: l.MemoryBytes, NanoCPUs: l.NanoCPUs, DiskBytes: l.DiskBytes, Timeout: timeout}, c)
	if err != nil {
		return err
	}
	if l.PidsLimit > c.PidsLimit {
		return fmt.Errorf("%w: --pids %d is over its ceiling %d (AGENTBOX_CEILING_PIDS)", jobs.ErrOverCeiling, l.PidsLimit, c.PidsLimit)
	}
	if l.PidsLimit > 0 {
		nofile, err := fitNoFile(cfg, log, 1, l.PidsLimit)
		if err != nil {
			return err
		}
		l.NoFile = nofile
	}
	return nil
}
