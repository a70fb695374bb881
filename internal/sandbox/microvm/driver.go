package microvm

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/diskusage"
	"github.com/agentbox/agentbox/internal/sandbox/loopdisk"
)

// DriverName is the name of this driver in its handles.
const DriverName = "microvm"

// Install says what to install for the tier's emulator.
const Install = "apt-get install qemu-system-x86 (QEMU and its virtiofsd; the kernel, " +
	KernelPackage + ", is fetched from Debian's archive with apt-get download)"

// DriverConfig configures the microVM driver.
type DriverConfig struct {
	// QEMU is the emulator (default qemu-system-x86_64 on PATH).
	QEMU string
	// CacheDir keeps the kernel, the initramfs and the root file systems
	// (default DefaultCacheDir).
	CacheDir string
	// StateDir holds one directory per sandbox: its sockets, QEMU's pid
	// file and disk overlay, its config disk, its handle (handle.json),
	// its workspace's loop disk (disk.img, mounted at disk) and, for
	// sandboxes without a caller's workspace, a scratch one; and the loop
	// disks' templates (.disks).
	StateDir string
	// Image is the default sandbox image, made into each VM's root file
	// system (BuildRootfs).
	Image string
	// GuestBinary is the static agentbox binary, the VM's /init (default
	// this executable).
	GuestBinary string
	// Defaults are the limits of a spec that sets none.
	Defaults sandbox.Limits
	// Display is the desktop size of a spec that sets none.
	Display sandbox.Display
	// ReadyTimeout bounds a boot (default 2 minutes: TCG is slow).
	ReadyTimeout time.Duration
	// UIDs is the range of host uids QEMU runs as, one per VM (default
	// config's sandbox range, 200000-299999).
	UIDs config.UIDRange
	// ConsoleLimit bounds each VM's console log on the host (default
	// 1 MiB): code in the guest can make its kernel write there.
	ConsoleLimit int64
	Log          *slog.Logger

	// MinFree is the free space and inodes of the state dir's and the
	// workspace's filesystems below which no VM starts.
	MinFree diskusage.Floor
}

// Driver runs each sandbox as a QEMU virtual machine. A VM dies with the
// process that started it, so only that process can reach it: Recover
// finds the VMs this process runs, and reports any other gone.
type Driver struct {
	cfg DriverConfig
	// mu guards the assets, made once (the kernel and initramfs) or once
	// per image (a root file system).
	mu        sync.Mutex
	kernel    *Kernel
	initramfs string
	// disks are the loop disk templates, in the state dir's .disks.
	disks *loopdisk.Templates
}

var _ sandbox.Driver = (*Driver)(nil)

// NewDriver returns the driver of cfg; what the tier needs on the host
// is checked by Available, at each Create.
func NewDriver(cfg DriverConfig) (*Driver, error) {
	if cfg.StateDir == "" || cfg.Image == "" {
		return nil, fmt.Errorf("%w: microvm driver needs a state dir and an image", sandbox.ErrInvalidSpec)
	}
	abs, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("microvm state dir: %w", err)
	}
	cfg.StateDir = abs
	if cfg.GuestBinary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("guest binary: %w", err)
		}
		cfg.GuestBinary = exe
	}
	if cfg.QEMU == "" {
		cfg.QEMU = "qemu-system-x86_64"
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = DefaultCacheDir
	}
	if cfg.UIDs == (config.UIDRange{}) {
		cfg.UIDs = config.Default().Sandbox.UIDs
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 2 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.Defaults.FillDefaults()
	return &Driver{cfg: cfg, disks: &loopdisk.Templates{Dir: filepath.Join(cfg.StateDir, ".disks")}}, nil
}

// Capabilities: a VM of its own, no network device, the guest over a
// virtio-serial port, the desktop and Jupyter (TestMicroVMDesktop,
// TestMicroVMJupyter).
func (d *Driver) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{Isolation: sandbox.IsolationMicroVM, Desktop: true, Networks: []string{"none"},
		Transport: sandbox.TransportSerial, Bind: true}
}

// Available says, with sandbox.ErrIsolationUnavailable, what this host
// lacks to run the tier: QEMU, its virtiofsd, root (virtiofsd runs as
// root), loop devices (the disk quota), or the kernel (fetched once).
func (d *Driver) Available(ctx context.Context) error {
	if _, err := exec.LookPath(d.cfg.QEMU); err != nil {
		return d.unavailable("no %s: %s", d.cfg.QEMU, Install)
	}
	if _, err := os.Stat(DefaultVirtioFSD); err != nil {
		return d.unavailable("no %s (virtio-fs, for the workspace): %s", DefaultVirtioFSD, Install)
	}
	if os.Geteuid() != 0 {
		return d.unavailable("the microvm tier runs as root (virtiofsd shares the workspace as root)")
	}
	if !loopdisk.Available() {
		return d.unavailable("no loop devices (/dev/loop-control) or no mkfs.ext4 (e2fsprogs): the workspace's disk quota is a loop disk")
	}
	if _, _, err := d.bootAssets(ctx); err != nil {
		return d.unavailable("%v (the kernel is Debian's %s: apt-get download needs the archive reachable and apt-get update done)", err, KernelPackage)
	}
	return nil
}

func (d *Driver) unavailable(format string, a ...any) error {
	return fmt.Errorf("%w: isolation %q: %s", sandbox.ErrIsolationUnavailable, sandbox.IsolationMicroVM, fmt.Sprintf(format, a...))
}

// bootAssets are the kernel and the initramfs, made once.
func (d *Driver) bootAssets(ctx context.Context) (Kernel, string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.kernel != nil {
		return *d.kernel, d.initramfs, nil
	}
	k, err := FetchKernel(ctx, d.cfg.CacheDir)
	if err != nil {
		return k, "", err
	}
	initrd, err := BuildInitramfs(k, d.cfg.GuestBinary, d.cfg.CacheDir)
	if err != nil {
		return k, "", err
	}
	d.kernel, d.initramfs = &k, initrd
	return k, initrd, nil
}

// rootfs is the root file system of image, built once per image ID (under
// the driver's lock: a build takes most of a minute and 3 GB).
func (d *Driver) rootfs(ctx context.Context, image string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return BuildRootfs(ctx, image, d.cfg.CacheDir)
}

// GuestBinary is the agentbox binary the VMs boot as their init.
func (d *Driver) GuestBinary() string { return d.cfg.GuestBinary }

// Close does nothing: the VMs belong to the process, not to the driver.
func (d *Driver) Close() error { return nil }

// Accel says how this host's VMs run their CPUs, KVM or TCG, and why not
// KVM (found once, as Create does).
func (d *Driver) Accel(ctx context.Context) (string, error) {
	k, _, err := d.bootAssets(ctx)
	if err != nil {
		return "", err
	}
	accel, why := ChooseAccel(ctx, d.cfg.QEMU, k.Image)
	if why, _, _ = strings.Cut(why, "\n"); why != "" {
		return fmt.Sprintf("%s: %s", accel, why), nil // QEMU's first line says why
	}
	return string(accel), nil
}
