// Package vminit is process 1 of an agentbox microVM (`agentbox guest
// --vm-init`, started by the kernel from the initramfs): it mounts what the
// guest needs, loads the kernel modules the initramfs carries, switches to
// the sandbox's root filesystem when the VM has one, and runs the guest
// daemon as the agent's uid on the virtio-serial port the host reaches it
// through. When the daemon ends (the host closed the port) it powers the
// VM off, so QEMU exits.
//
// The host side (internal/sandbox/microvm) builds the initramfs this
// package expects; the names below are the contract between the two.
package vminit

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/guest"
)

// The initramfs layout and the VM's devices, as the host builds them.
const (
	// ModulesDir holds the kernel modules, ModulesList their names (one
	// per line) in the order they load.
	ModulesDir  = "/lib/modules"
	ModulesList = "/etc/agentbox/modules"
	// PortName is the name of the virtio-serial port the guest answers on.
	PortName = "agentbox"
	// RootDevice is the sandbox's root filesystem (ext4), when the VM has one.
	RootDevice = "/dev/vda"
	// Workspace is where the agent works.
	Workspace = "/workspace"
	// AgentUID is the uid (and gid) the guest daemon and commands run as
	// when the config names none (the image's "agent"): a driver's VMs
	// run as a uid of their own (Config.AgentUID).
	AgentUID = 1000
	// AgentHome is the agent's home directory: a tmpfs of its own, as in
	// the container tiers (the root file system is read-only).
	AgentHome = "/home/agent"
)

// Run is process 1: it prepares the VM, runs the guest daemon until it
// exits and powers off. It returns only if powering off failed.
func Run(log *slog.Logger) error {
	err := boot(log)
	if err != nil {
		log.Error("vm init", "err", err)
	}
	unix.Sync()
	if perr := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); perr != nil {
		return errors.Join(err, fmt.Errorf("power off: %w", perr))
	}
	return err
}

// boot runs the steps up to the daemon's end.
func boot(log *slog.Logger) error {
	start := time.Now()
	if err := mountEarly(); err != nil {
		return err
	}
	if err := loadModules(); err != nil {
		return err
	}
	cfg, err := readConfig()
	if err != nil {
		return err
	}
	if _, err := os.Stat(RootDevice); err == nil {
		if err := switchRoot(); err != nil {
			return err
		}
	}
	if err := containerLike(); err != nil {
		return err
	}
	if err := mountRuntime(cfg.SharedWorkspace, cfg.agent()); err != nil {
		return err
	}
	if err := accounts(cfg.agent()); err != nil {
		return err
	}

	if err := loopbackUp(); err != nil {
		return err
	}
	if err := userNamespacesOff(); err != nil {
		return err
	}
	cg, err := sandboxCgroup(cfg)
	if err != nil {
		return err
	}
	defer cg.Close()
	port, err := findPort(PortName, 5*time.Second)
	if err != nil {
		return err
	}
	log.Info("vm init ready", "port", port, "took", time.Since(start))
	return runDaemon(port, cfg, cg)
}

type mount struct {
	source, target, fstype string
	flags                  uintptr
	data                   string
}

func (m mount) do() error {
	if err := os.MkdirAll(m.target, 0o755); err != nil {
		return fmt.Errorf("mount %s: %w", m.target, err)
	}
	if err := unix.Mount(m.source, m.target, m.fstype, m.flags, m.data); err != nil {
		return fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err)
	}
	return nil
}

// mountEarly mounts /dev, /proc and /sys.
func mountEarly() error {
	for _, m := range []mount{
		{"devtmpfs", "/dev", "devtmpfs", unix.MS_NOSUID, "mode=0755"},
		{"proc", "/proc", "proc", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
		{"sysfs", "/sys", "sysfs", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC, ""},
	} {
		if err := m.do(); err != nil && !errors.Is(err, unix.EBUSY) {
			return err
		}
	}
	return nil
}

// loadModules loads the modules ModulesList names, in its order.
func loadModules() error {
	b, err := os.ReadFile(ModulesList)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("modules: %w", err)
	}
	for _, name := range strings.Fields(string(b)) {
		if err := loadModule(filepath.Join(ModulesDir, name)); err != nil {
			return err
		}
	}
	return nil
}

func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("module: %w", err)
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("load module %s: %w", filepath.Base(path), err)
	}
	return nil
}

// switchRoot mounts RootDevice and makes it the root, moving /dev, /proc
// and /sys along, after freeing the modules the initramfs held in memory.
func switchRoot() error {
	const newRoot = "/newroot"
	// Read-only, as QEMU gives the disk, and as a container tier's root
	// is: the agent writes only to the workspace and the tmpfs mounts.
	if err := (mount{RootDevice, newRoot, "ext4", unix.MS_RDONLY, ""}).do(); err != nil {
		return err
	}
	_ = os.RemoveAll(ModulesDir)
	for _, dir := range []string{"/dev", "/proc", "/sys"} {
		if err := (mount{dir, newRoot + dir, "", unix.MS_MOVE, ""}).do(); err != nil {
			return err
		}
	}
	if err := os.Chdir(newRoot); err != nil {
		return fmt.Errorf("switch root: %w", err)
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("switch root: move: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("switch root: chroot: %w", err)
	}
	return os.Chdir("/")
}

// mountRuntime mounts the scratch file systems a Debian userland expects,
// and the workspace: the host's virtio-fs share if shared, else a tmpfs
// owned by the agent.
func mountRuntime(shared bool, uid int) error {
	ws := mount{"tmpfs", Workspace, "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, fmt.Sprintf("mode=0755,uid=%d,gid=%d", uid, uid)}
	if shared {
		ws = mount{WorkspaceTag, Workspace, "virtiofs", unix.MS_NOSUID | unix.MS_NODEV, ""}
	}
	for _, m := range []mount{
		{"devpts", "/dev/pts", "devpts", unix.MS_NOSUID | unix.MS_NOEXEC, "mode=0620,ptmxmode=0666"},
		{"tmpfs", "/dev/shm", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
		{"tmpfs", "/tmp", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=1777"},
		{"tmpfs", "/run", "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, "mode=0755"},
		{"tmpfs", AgentHome, "tmpfs", unix.MS_NOSUID | unix.MS_NODEV, fmt.Sprintf("mode=0700,uid=%d,gid=%d", uid, uid)},
		ws,
	} {
		if err := m.do(); err != nil {
			return err
		}
	}
	return nil
}

// accounts puts /etc/passwd and /etc/group naming uid "agent" over the
// read-only root's (guest.Accounts, as the container tier does): files in
// /run, bind-mounted read-only.
func accounts(uid int) error {
	passwd, group := guest.Accounts(uid)
	for name, text := range map[string]string{"passwd": passwd, "group": group} {
		src := "/run/agentbox-" + name
		if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
			return fmt.Errorf("accounts: %w", err)
		}
		dst := "/etc/" + name
		if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("accounts: bind %s: %w", dst, err)
		}
		if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("accounts: %s read-only: %w", dst, err)
		}
	}
	return nil
}

// loopbackUp brings up lo: the guest reaches the services it proxies
// (noVNC, Jupyter) on 127.0.0.1 even where the VM has no network device.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	ifr.SetUint16(unix.IFF_UP | unix.IFF_LOOPBACK | unix.IFF_RUNNING)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}

// findPort returns the device of the virtio-serial port called name,
// waiting up to wait for the driver to publish it.
func findPort(name string, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	for {
		ports, _ := filepath.Glob("/sys/class/virtio-ports/*/name")
		for _, p := range ports {
			if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == name {
				return "/dev/" + filepath.Base(filepath.Dir(p)), nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no virtio-serial port named %q (of %d)", name, len(ports))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runDaemon starts the guest daemon as the agent on port, in the
// sandbox's cgroup, without privileges to gain (no_new_privs), with cfg's
// environment and open-files limit, told to take the seccomp profile
// before it listens (DaemonSeccompFlag), then reaps every process
// (process 1 adopts the orphans) until the daemon has exited.
func runDaemon(port string, cfg Config, cgroup *os.File) error {
	uid := cfg.agent()
	if err := os.Chown(port, uid, uid); err != nil {
		return fmt.Errorf("port: %w", err)
	}
	if cfg.NoFile > 0 {
		lim := syscall.Rlimit{Cur: uint64(cfg.NoFile), Max: uint64(cfg.NoFile)}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return fmt.Errorf("open files limit: %w", err)
		}
	}
	// no_new_privs belongs to a thread and passes to what it forks: set
	// it on the thread that starts the daemon.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	attr := &os.ProcAttr{
		Dir: Workspace,
		Env: append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/home/agent", "USER=agent", "LANG=C.UTF-8"},
			cfg.Env...),
		Files: []*os.File{nil, os.Stdout, os.Stderr},
		Sys: &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: int(cgroup.Fd()),
			Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{uint32(uid)}}},
	}
	args := append([]string{"agentbox", "guest", DaemonSeccompFlag, "--listen", "serial:" + port, "--workspace", Workspace}, cfg.DaemonArgs...)
	p, err := os.StartProcess("/proc/self/exe", args, attr)
	if err != nil {
		return fmt.Errorf("start guest daemon: %w", err)
	}
	return reap(p.Pid)
}

// reap waits for every child until pid has exited.
func reap(pid int) error {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait: %w", err)
		}
		if got == pid {
			if ws.ExitStatus() != 0 {
				return fmt.Errorf("guest daemon exited: status %d", ws.ExitStatus())
			}
			return nil
		}
	}
}
