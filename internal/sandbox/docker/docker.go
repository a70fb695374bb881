// Package docker is the sandbox driver for Docker and for Podman's
// Docker-compatible API. It talks to the engine with the official Engine API
// client, never the CLI. Each sandbox is one locked-down container whose main
// process (under the engine's init) is the agentbox guest, bind-mounted
// read-only from the host and reached through a unix socket in a host
// directory mounted at /run/agentbox, or (Config.Transport "tcp") over TCP
// on the container's loopback, dialed from inside its network namespace.
package docker

import (
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/loopdisk"
)

// Paths inside every sandbox.
const (
	GuestPath     = "/opt/agentbox/agentbox"
	GuestStateDir = "/run/agentbox"
	WorkspacePath = "/workspace"
)

// Labels put on every sandbox container.
const (
	LabelManaged   = "io.agentbox.managed"
	LabelInstance  = "io.agentbox.instance"
	LabelSandbox   = "io.agentbox.sandbox"
	LabelJob       = "io.agentbox.job"
	LabelOwner     = "io.agentbox.owner"
	LabelStateDir  = "io.agentbox.state-dir"
	LabelWorkspace = "io.agentbox.workspace"
	LabelOwnsWS    = "io.agentbox.owns-workspace"
	LabelUID       = "io.agentbox.uid"
	LabelDisk      = "io.agentbox.disk"
	LabelWSOwner   = "io.agentbox.workspace-owner"
	LabelIsolation = "io.agentbox.isolation"
)

// RuntimeGVisor is the engine runtime of the gvisor isolation tier: gVisor's
// runsc, registered with the engine (scripts/setup.sh does it).
const RuntimeGVisor = "runsc"

// GVisorPidsHeadroom is what the gvisor tier adds to a sandbox's pids
// limit for runsc's own threads. The engine applies the limit to the
// sandbox's host cgroup, where the Sentry (its Go runtime, and on the
// ptrace platform a host thread per guest thread) counts: measured here,
// an idle sandbox running one python3 holds 100 pids where runc's holds
// 25. Under the bare limit a sandbox of 64 dies before its guest answers
// and one of 32 wedges runsc's start, the container stuck in Created and
// `docker rm -f` hanging until the Sentry is killed by hand.
const GVisorPidsHeadroom = 256

// maxSocketPath is the longest unix socket path Linux accepts (sun_path less NUL).
const maxSocketPath = 107

// Config configures the driver.
type Config struct {
	// Host is the engine address; empty means DOCKER_HOST or the default socket.
	Host  string
	Image string
	// Defaults are the limits of a spec that sets none.
	Defaults sandbox.Limits
	Network  string
	// GuestBinary is the static agentbox binary mounted into every sandbox.
	GuestBinary string
	// StateDir holds one directory per sandbox: the guest's socket and, for
	// sandboxes without a caller's workspace, a scratch workspace.
	StateDir string
	Instance string
	// Display is the desktop size of a spec that sets none (default 1024x768).
	Display sandbox.Display
	// ReadyTimeout bounds how long Create waits for the guest (default 60s).
	ReadyTimeout time.Duration
	// UIDs is the range of host uids sandboxes run as, one each (default
	// 200000-299999).
	UIDs config.UIDRange
	// Quota is "" to enforce disk quotas in the kernel where the host
	// allows it, or QuotaWatch to always use the watchdog.
	Quota string
	// MinFreeBytes is the free space below which no sandbox starts.
	MinFreeBytes int64
	// MinFreeInodes is the count of free inodes below which no sandbox
	// starts.
	MinFreeInodes int64
	// Transport is how the host reaches the guests of new sandboxes:
	// sandbox.TransportUnix (the default) or sandbox.TransportTCP, which
	// needs root (the host enters the container's network namespace).
	// Recover reaches each sandbox the way it was made.
	Transport string
	// Runtime is the engine runtime sandboxes run under: "" for the
	// engine's default (runc: the container tier) or RuntimeGVisor (the
	// gvisor tier). Capabilities().Isolation says which.
	Runtime string
	Log     *slog.Logger
}

// Driver creates sandboxes as containers.
type Driver struct {
	cli *client.Client
	cfg Config
	log *slog.Logger
	mu  sync.Mutex
	// uids are the uids this driver gave to sandboxes that still exist.
	uids map[int]bool
	// disks are the loop disk templates, in the state dir's .disks.
	disks *loopdisk.Templates
	// engineKnown is whether podman, the engine being Podman, was asked
	// (isPodman), under engineMu.
	engineMu            sync.Mutex
	engineKnown, podman bool
	lateState
}

var _ sandbox.Driver = (*Driver)(nil)

// New connects to the engine (lazily: the first call reports an unreachable
// engine) and checks the guest binary.
func New(cfg Config) (*Driver, error) {
	if err := checkConfig(&cfg); err != nil {
		return nil, err
	}
	opts := []client.Opt{client.WithAPIVersionNegotiation()}
	if cfg.Host != "" {
		opts = append(opts, client.WithHost(cfg.Host))
	} else {
		opts = append(opts, client.WithHostFromEnv())
	}
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return &Driver{cli: cli, cfg: cfg, log: cfg.Log, uids: map[int]bool{},
		disks: &loopdisk.Templates{Dir: filepath.Join(cfg.StateDir, ".disks")}}, nil
}

func checkConfig(cfg *Config) error {
	if cfg.Image == "" || cfg.StateDir == "" || cfg.Instance == "" {
		return fmt.Errorf("%w: docker driver needs an image, a state dir and an instance", sandbox.ErrInvalidSpec)
	}
	if cfg.Network == "" {
		cfg.Network = "none"
	}
	if cfg.Runtime != "" && cfg.Runtime != RuntimeGVisor {
		return fmt.Errorf("%w: docker runtime %q: want none (runc) or %s", sandbox.ErrInvalidSpec, cfg.Runtime, RuntimeGVisor)
	}
	if err := capabilities(cfg.Runtime, "").CheckNetwork(cfg.Network); err != nil {
		return err
	}
	if err := checkTransport(&cfg.Transport); err != nil {
		return err
	}
	if err := sandbox.CheckDisplay(sandbox.Spec{Display: cfg.Display}); err != nil {
		return err
	}
	cfg.Defaults.FillDefaults()
	if cfg.UIDs == (config.UIDRange{}) {
		cfg.UIDs = config.Default().Sandbox.UIDs
	}
	if err := cfg.UIDs.Validate(); err != nil {
		return fmt.Errorf("%w: %w", sandbox.ErrInvalidSpec, err)
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 60 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.GuestBinary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("guest binary: %w", err)
		}
		cfg.GuestBinary = exe
	}
	abs, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	cfg.StateDir = abs
	return CheckGuestBinary(cfg.GuestBinary)
}

// CheckGuestBinary verifies that path is a statically linked ELF executable,
// which is what runs inside any image.
func CheckGuestBinary(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("guest binary %s: %w (set AGENTBOX_GUEST_BINARY to a static agentbox build)", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("guest binary %s is dynamically linked and cannot run in the sandbox image; build it with CGO_ENABLED=0 (make build)", path)
		}
	}
	return nil
}

// Client returns the engine client, for the doctor and the benchmark.
func (d *Driver) Client() *client.Client { return d.cli }

// StateDir is the directory holding one directory per sandbox.
func (d *Driver) StateDir() string { return d.cfg.StateDir }

// Close releases the engine connection.
func (d *Driver) Close() error { return d.cli.Close() }

// Capabilities says what this driver's sandboxes offer.
func (d *Driver) Capabilities() sandbox.Capabilities {
	c := capabilities(d.cfg.Runtime, d.cfg.Transport)
	c.Bind = d.bindsLate()
	return c
}

// capabilities are those of sandboxes under runtime. Under gVisor the
// runtime is registered with --network=none (scripts/setup.sh): runsc
// then gives each sandbox only its own loopback, whatever the engine's
// network, so no other network may be asked for.
func capabilities(runtime, transport string) sandbox.Capabilities {
	c := sandbox.Capabilities{
		Isolation: sandbox.IsolationContainer, Desktop: true,
		Networks: []string{"none", "bridge"}, NamedNetworks: true,
		Transport: transport, Pause: true,
	}
	if runtime == RuntimeGVisor {
		c.Isolation, c.Networks, c.NamedNetworks = sandbox.IsolationGVisor, []string{"none"}, false
	}
	return c
}

// Available reports, with sandbox.ErrIsolationUnavailable, that the
// engine does not know the driver's runtime, saying how to install it.
func (d *Driver) Available(ctx context.Context) error {
	if d.cfg.Runtime == "" {
		return nil
	}
	if podman, err := d.isPodman(ctx); err == nil && podman {
		return fmt.Errorf("%w: %s", sandbox.ErrIsolationUnavailable, PodmanIgnoresRuntime)
	}
	info, err := d.cli.Info(ctx)
	if err != nil {
		return fmt.Errorf("%w: the %s tier: ask the engine for its runtimes: %w", sandbox.ErrIsolationUnavailable, d.Capabilities().Isolation, engineErr(err))
	}
	if _, ok := info.Runtimes[d.cfg.Runtime]; !ok {
		return fmt.Errorf("%w: %s", sandbox.ErrIsolationUnavailable, GVisorMissing)
	}
	return nil
}

// GVisorMissing says what the gvisor tier lacks when the engine has no
// runsc runtime, and how to install it.
const GVisorMissing = "the gvisor tier needs gVisor's runsc runtime registered with Docker, and this engine has none: " +
	"run scripts/setup.sh (it installs Debian's runsc package and registers it in /etc/docker/daemon.json with " +
	`runtimeArgs ["--host-uds=all", "--network=none"], then reloads dockerd), or do the same by hand`

// checkTransport defaults and checks the guest transport.
func checkTransport(t *string) error {
	switch *t {
	case "":
		*t = sandbox.TransportUnix
	case sandbox.TransportUnix:
	case sandbox.TransportTCP:
		if !isRoot() {
			return fmt.Errorf("%w: the tcp guest transport dials from inside each sandbox's network namespace, which needs root; use unix", sandbox.ErrInvalidSpec)
		}
	default:
		return fmt.Errorf("%w: guest transport %q: want unix or tcp", sandbox.ErrInvalidSpec, *t)
	}
	return nil
}

// Engine describes the engine behind the driver.
type Engine struct {
	Name       string // Docker or Podman
	Version    string
	APIVersion string
}

// Engine asks the engine what it is.
func (d *Driver) Engine(ctx context.Context) (Engine, error) { return EngineInfo(ctx, d.cli) }

// EngineInfo asks the engine behind cli what it is: Docker or Podman, and
// which version.
func EngineInfo(ctx context.Context, cli client.APIClient) (Engine, error) {
	v, err := cli.ServerVersion(ctx)
	if err != nil {
		return Engine{}, engineErr(err)
	}
	e := Engine{Name: "Docker", Version: v.Version, APIVersion: v.APIVersion}
	for _, c := range v.Components {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			e.Name, e.Version = "Podman", c.Version
		}
	}
	return e, nil
}

// engineErr marks connection failures so callers can tell them apart.
func engineErr(err error) error {
	if client.IsErrConnectionFailed(err) {
		return fmt.Errorf("%w: %w", sandbox.ErrEngineUnavailable, err)
	}
	return err
}

// Recover reattaches to a running sandbox, from a handle of either version.
func (d *Driver) Recover(ctx context.Context, h sandbox.Handle) (sandbox.Sandbox, error) {
	r, err := recordOf(h)
	if err != nil {
		return nil, fmt.Errorf("recover sandbox %s: %w", h.ID, err)
	}
	info, err := d.cli.ContainerInspect(ctx, r.Ref)
	if cerrdefs.IsNotFound(err) {
		return nil, fmt.Errorf("recover sandbox %s: %w", h.ID, sandbox.ErrGone)
	}
	if err != nil {
		return nil, fmt.Errorf("recover sandbox %s: %w", h.ID, engineErr(err))
	}
	if info.State == nil || !info.State.Running {
		return nil, fmt.Errorf("recover sandbox %s: container not running: %w", h.ID, sandbox.ErrGone)
	}
	s := d.newSandbox(r)
	if _, err := s.g.Handshake(ctx); err != nil {
		s.g.Close()
		return nil, fmt.Errorf("recover sandbox %s: %w: %w", h.ID, sandbox.ErrGone, err)
	}
	// Sandboxes of releases before the lock still have a socket dir they
	// can write; the dialer refuses links either way.
	if err := lockRunDir(filepath.Join(r.StateDir, "run")); err != nil {
		s.g.Close()
		return nil, fmt.Errorf("recover sandbox %s: %w", h.ID, err)
	}
	if r.UID != 0 {
		d.mu.Lock()
		d.uids[r.UID] = true
		d.mu.Unlock()
	}
	s.watch()
	return s, nil
}

// List returns this instance's sandboxes, running or not. Their handles
// come from the containers' labels, which hold no secret: they are good
// for Remove, not for Recover over TCP. Only containers Create made are
// listed (made): labels alone prove nothing, as every container of an
// image carries the image's labels. One this driver made unbound and has
// not bound yet is left out (see lateState).
func (d *Driver) List(ctx context.Context) ([]sandbox.Listed, error) {
	f := filters.NewArgs(
		filters.Arg("label", LabelManaged+"=true"),
		filters.Arg("label", LabelInstance+"="+d.cfg.Instance),
	)
	cs, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", engineErr(err))
	}
	out := make([]sandbox.Listed, 0, len(cs))
	for _, c := range cs {
		if !d.made(c.Names, c.Labels) {
			d.leftAlone(c.ID, c.Names, c.Labels)
			continue
		}
		if _, held := d.unbound.Load(c.Labels[LabelSandbox]); held {
			continue // made unbound here and not bound yet: no orphan
		}
		out = append(out, sandbox.Listed{Handle: recordFromLabels(c.ID, c.Labels).handle(), Running: c.State == "running"})
	}
	return out, nil
}

// warnedNotMade are the containers leftAlone warned about, once per
// process: every tier's driver lists them at each reaper pass.
var warnedNotMade sync.Map // container ID -> true

// leftAlone logs a container List leaves alone, carrying this instance's
// labels though Create did not make it. Another installation's sandbox
// (the same AGENTBOX_INSTANCE, another data dir: a run beside a server)
// is expected and logged at debug level; anything else (labels copied or
// forged) is a warning, once.
func (d *Driver) leftAlone(ref string, names []string, l map[string]string) {
	id := l[LabelSandbox]
	if id != "" && filepath.Base(id) == id && slices.Contains(names, "/"+containerName(id)) {
		d.log.Debug("another installation's sandbox (this instance label, another state dir): left alone",
			"container", ref, "state_dir", l[LabelStateDir])
		return
	}
	if _, seen := warnedNotMade.LoadOrStore(ref, true); !seen {
		d.log.Warn("a container carries the labels of this installation's sandboxes but is not one; left alone", "container", ref, "names", names)
	}
}

// made reports whether a container of these names and labels is one
// Create made: named after the sandbox its labels name, with that
// sandbox's state dir. Create sets every label it reads over any the
// image has; only Create names a container so.
func (d *Driver) made(names []string, l map[string]string) bool {
	id := l[LabelSandbox]
	return id != "" && filepath.Base(id) == id && slices.Contains(names, "/"+containerName(id)) &&
		l[LabelStateDir] == filepath.Join(d.cfg.StateDir, id)
}

func recordFromLabels(ref string, l map[string]string) record {
	uid, _ := strconv.Atoi(l[LabelUID])
	disk, _ := strconv.ParseInt(l[LabelDisk], 10, 64)
	return withBound(record{ID: l[LabelSandbox], JobID: l[LabelJob], Owner: l[LabelOwner], Isolation: l[LabelIsolation], State: State{
		Ref: ref, StateDir: l[LabelStateDir], WorkspaceDir: l[LabelWorkspace],
		OwnsWorkspace: l[LabelOwnsWS] == "true", UID: uid, DiskBytes: disk, WorkspaceOwner: l[LabelWSOwner],
	}})
}

func newID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func isRoot() bool { return os.Geteuid() == 0 }
