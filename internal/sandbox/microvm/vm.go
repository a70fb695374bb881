package microvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/capped"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/serialmux"
	"github.com/agentbox/agentbox/internal/guest/vminit"
)

// Config describes one VM.
type Config struct {
	// QEMU is the emulator (default qemu-system-x86_64 on PATH).
	QEMU string
	// Kernel and Initramfs are what it boots (FetchKernel, BuildInitramfs).
	Kernel, Initramfs string
	// Rootfs is the ext4 image of the root file system (BuildRootfs); the
	// VM writes to a throwaway overlay of it, never to the image. Empty:
	// the guest runs from the initramfs alone.
	Rootfs string
	// MemoryMiB and CPUs size the VM (default 512 MiB, 1 vCPU).
	MemoryMiB, CPUs int
	// Accel is KVM or TCG; empty chooses (ChooseAccel).
	Accel Accel
	// Machine is QEMU's machine type: "q35" (the default: PCI, SeaBIOS,
	// and an HPET and ACPI PM timer the kernel calibrates its clock
	// against) or "microvm" (virtio over MMIO, no firmware to speak of,
	// but only the PIT to calibrate against, which fails under TCG on a
	// loaded host and leaves the kernel hanging).
	Machine string
	// Dir is a private directory for the VM's sockets, pid file, console
	// log (console.log) and the throwaway overlay of Rootfs (QEMU's
	// snapshot file, made in its TMPDIR); the caller owns it.
	Dir string
	// ConfigDisk is a file holding the guest's vminit.Config
	// (vminit.Config.Encode), given to the guest as a read-only disk.
	// Empty: none.
	ConfigDisk string
	// WorkspaceDir is a host directory shared with the guest over
	// virtio-fs (a virtiofsd per VM); the guest mounts it at /workspace
	// when its Config says SharedWorkspace. Empty: none.
	WorkspaceDir string
	// VirtioFSD is the virtio-fs daemon (default DefaultVirtioFSD).
	VirtioFSD string
	// NoFile is the sandbox's open-files limit, from which virtiofsd's
	// own is set (fsNoFile; 0: fsNoFile's floor).
	NoFile int64
	// Stderr receives QEMU's own messages.
	Stderr io.Writer
	// UID is the host uid QEMU runs as, its gid the same: one no other
	// process uses (0: the caller's, for tests of QEMU alone).
	UID int
	// ConsoleLimit bounds the guest console's log, console.log in Dir
	// (default 1 MiB); what comes after is dropped.
	ConsoleLimit int64
}

// DefaultVirtioFSD is where Debian's QEMU (qemu-system-common) ships the
// C virtio-fs daemon; bookworm has no virtiofsd package of its own.
const DefaultVirtioFSD = "/usr/lib/qemu/virtiofsd"

// VM is a running QEMU whose guest answers.
type VM struct {
	cmd    *exec.Cmd
	fsd    *fsDaemon // the workspace's virtiofsd, or nil
	accel  Accel
	sess   *serialmux.Session
	client *guest.Client
	exited chan struct{} // closed once QEMU has exited
	err    error         // how it exited, set before exited closes
}

// Start boots a VM and returns once its guest daemon answers, or kills it
// when ctx ends first. The VM then runs until Close, and dies with the
// process that started it (it is its parent-death signal).
//
// QEMU runs as cfg.UID when it is set: an unprivileged uid of the VM's
// own, under QEMU's seccomp filter (-sandbox), so that a guest escaping
// into QEMU's device emulation holds no privilege on the host. It gets
// everything it needs open (hostFiles): it can reach no path of agentbox's.
func Start(ctx context.Context, cfg Config) (*VM, error) {
	cfg.defaults()
	if cfg.Accel == "" {
		cfg.Accel, _ = ChooseAccel(ctx, cfg.QEMU, cfg.Kernel)
	}
	v := &VM{accel: cfg.Accel, exited: make(chan struct{})}
	hf, host, err := v.hostFiles(cfg)
	if err != nil {
		return nil, fmt.Errorf("microvm: %w", err)
	}
	defer hf.close() // QEMU has its copies once started
	console, err := openConsole(cfg.Dir, cfg.ConsoleLimit)
	if err != nil {
		host.Close()
		v.fsd.stop()
		return nil, fmt.Errorf("microvm: %w", err)
	}
	stderr := &capped.Buffer{Max: 4 << 10}
	v.cmd = exec.Command(cfg.QEMU, cfg.args(hf.fd)...)
	v.cmd.ExtraFiles = hf.files
	v.cmd.Stdout = console // the serial console (-chardev stdio)
	v.cmd.Stderr = io.MultiWriter(stderr, cfg.Stderr)
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cfg.credential()}
	if err := startPinned(v.cmd, func(err error) { v.err = err; console.Close(); close(v.exited) }); err != nil {
		console.Close()
		host.Close()
		v.fsd.stop()
		return nil, fmt.Errorf("microvm: start %s: %w", cfg.QEMU, err)
	}
	hf.close()
	if err := writePID(cfg.Dir, v.PID()); err != nil {
		host.Close()
		v.kill()
		return nil, fmt.Errorf("microvm: %w", err)
	}
	if err := v.connect(ctx, host); err != nil {
		v.kill()
		return nil, fmt.Errorf("microvm: %w (qemu: %s)", err, stderr.String())
	}
	return v, nil
}

// credential is who QEMU runs as: cfg.UID (with the kvm group when it
// uses KVM), or nil for the caller.
func (cfg *Config) credential() *syscall.Credential {
	if cfg.UID == 0 {
		return nil
	}
	c := &syscall.Credential{Uid: uint32(cfg.UID), Gid: uint32(cfg.UID), Groups: []uint32{}}
	if cfg.Accel == KVM {
		if g, err := user.LookupGroup("kvm"); err == nil {
			if gid, err := strconv.Atoi(g.Gid); err == nil {
				c.Groups = append(c.Groups, uint32(gid))
			}
		}
	}
	return c
}

// writePID records QEMU's pid in the VM's dir, for List and Remove in
// another process (QEMU, unprivileged, cannot write there itself).
func writePID(dir string, pid int) error {
	if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
		return fmt.Errorf("pid file: %w", err)
	}
	return nil
}

func (cfg *Config) defaults() {
	if cfg.QEMU == "" {
		cfg.QEMU = "qemu-system-x86_64"
	}
	if cfg.MemoryMiB <= 0 {
		cfg.MemoryMiB = 512
	}
	if cfg.Machine == "" {
		cfg.Machine = "q35"
	}
	if cfg.CPUs <= 0 {
		cfg.CPUs = 1
	}
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	if cfg.VirtioFSD == "" {
		cfg.VirtioFSD = DefaultVirtioFSD
	}
	if cfg.ConsoleLimit <= 0 {
		cfg.ConsoleLimit = defaultConsoleLimit
	}
}

// args is QEMU's command line: the machine (microvm with its legacy timer
// and interrupt controller on: left to "auto", Debian's kernel finds no
// PIT to calibrate its clock against and hangs once a virtio device is
// present), QEMU's seccomp filter, no default devices and no network
// device, the console to QEMU's stdout, and every file and socket by the
// descriptor fd gives it (hostFiles), none by path. The root disk is
// read-only: the guest mounts it so, and writes only to tmpfs and the
// workspace. The name marks the process as this VM's (qemuPID).
func (cfg *Config) args(fd func(string) int) []string {
	// TCG keeps QEMU's default 1 GiB translation cache: bounded at 256 MiB
	// the boot took three times as long, at 64 MiB it did not finish.
	cpu, machine, bus := "max", cfg.Machine, "pci"
	if cfg.Machine == "microvm" {
		machine, bus = "microvm,pit=on,pic=on,rtc=on", "device"
	}
	if cfg.Accel == KVM {
		cpu = "host"
	}
	if cfg.WorkspaceDir != "" {
		// vhost-user needs the guest's memory shared with virtiofsd.
		machine += ",memory-backend=mem"
	}
	procFD := func(name string) string { return "/proc/self/fd/" + strconv.Itoa(fd(name)) }
	a := []string{"-name", "guest=" + qemuOpt(vmMarker(cfg.Dir)),
		"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-M", machine, "-accel", string(cfg.Accel), "-cpu", cpu,
		"-m", strconv.Itoa(cfg.MemoryMiB), "-smp", strconv.Itoa(cfg.CPUs),
		"-kernel", procFD("kernel"), "-initrd", procFD("initrd"),
		"-append", "console=ttyS0 panic=-1 loglevel=4 -- guest --vm-init",
		"-chardev", "stdio,id=console,signal=off", // to console.log, capped (consoleFile)
		"-serial", "chardev:console",
		"-device", "virtio-serial-" + bus + ",id=vser",
		"-chardev", "socket,id=guest,fd=" + strconv.Itoa(fd("serial")),
		"-device", "virtserialport,bus=vser.0,chardev=guest,name=" + vminit.PortName,
	}
	if cfg.Rootfs != "" {
		a = append(a, "-add-fd", fmt.Sprintf("fd=%d,set=1", fd("rootfs")),
			"-drive", "if=none,id=root,format=raw,readonly=on,file=/dev/fdset/1",
			"-device", "virtio-blk-"+bus+",drive=root")
	}
	if cfg.ConfigDisk != "" {
		a = append(a, "-add-fd", fmt.Sprintf("fd=%d,set=2", fd("config")),
			"-drive", "if=none,id=config,format=raw,readonly=on,file=/dev/fdset/2",
			"-device", "virtio-blk-"+bus+",drive=config,serial="+vminit.ConfigSerial)
	}
	if cfg.WorkspaceDir != "" {
		a = append(a, "-object", fmt.Sprintf("memory-backend-memfd,id=mem,size=%dM,share=on", cfg.MemoryMiB),
			"-chardev", "socket,id=fs,fd="+strconv.Itoa(fd("fs")),
			"-device", "vhost-user-fs-"+bus+",chardev=fs,tag="+vminit.WorkspaceTag)
	}
	return a
}

// vmMarker names the VM of dir in its QEMU's command line.
func vmMarker(dir string) string { return "agentbox-vm:" + dir }

// qemuOpt escapes s as the value of a QEMU option (commas doubled).
func qemuOpt(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// connect waits on the guest's port (host, the host's end of the socket
// pair whose other end QEMU has) for the guest's hello and first answer.
func (v *VM) connect(ctx context.Context, host net.Conn) error {
	var err error
	v.sess, err = serialmux.Connect(ctx, host)
	if err != nil {
		select {
		case <-v.exited:
			return fmt.Errorf("qemu exited: %v", v.err)
		default:
		}
		return err
	}
	v.client = guest.New(v.sess.Dial, "")
	if _, err := v.client.Health(ctx); err != nil {
		v.sess.Close()
		return fmt.Errorf("guest health: %w", err)
	}
	return nil
}

// Guest is the client of the VM's guest daemon.
func (v *VM) Guest() *guest.Client { return v.client }

// Accel is the accelerator the VM runs on.
func (v *VM) Accel() Accel { return v.accel }

// PID is QEMU's process ID.
func (v *VM) PID() int { return v.cmd.Process.Pid }

// hostPIDs are QEMU's and, if it runs one, virtiofsd's process IDs.
func (v *VM) hostPIDs() []int {
	pids := []int{v.PID()}
	if v.fsd != nil {
		pids = append(pids, v.fsd.cmd.Process.Pid)
	}
	return pids
}

// Exited is closed once QEMU has exited.
func (v *VM) Exited() <-chan struct{} { return v.exited }

// Close shuts the VM down: it closes the guest's port, on which the guest
// powers off, and kills QEMU if it has not exited within grace (or ctx
// ends first). It returns once QEMU is gone.
func (v *VM) Close(ctx context.Context, grace time.Duration) error {
	v.client.Close()
	v.sess.Close()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-v.exited:
		v.fsd.stop()
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	v.kill()
	return errors.New("microvm: guest did not power off; killed")
}

// kill ends QEMU and waits for it.
func (v *VM) kill() {
	_ = v.cmd.Process.Kill()
	<-v.exited
	v.fsd.stop()
}
