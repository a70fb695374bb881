package microvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

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
	// Stderr receives QEMU's own messages.
	Stderr io.Writer
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
func Start(ctx context.Context, cfg Config) (*VM, error) {
	cfg.defaults()
	if cfg.Accel == "" {
		cfg.Accel, _ = ChooseAccel(ctx, cfg.QEMU, cfg.Kernel)
	}
	sock := filepath.Join(cfg.Dir, "serial.sock")
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("microvm: %w", err)
	}
	defer l.Close()
	v := &VM{accel: cfg.Accel, exited: make(chan struct{})}
	if cfg.WorkspaceDir != "" {
		if v.fsd, err = startVirtioFSD(cfg); err != nil {
			return nil, err
		}
	}
	console, err := openConsole(cfg.Dir, cfg.ConsoleLimit)
	if err != nil {
		v.fsd.stop()
		return nil, fmt.Errorf("microvm: %w", err)
	}
	stderr := &limitedBuffer{}
	v.cmd = exec.Command(cfg.QEMU, cfg.args(sock)...)
	v.cmd.Stdout = console // the serial console (-chardev stdio)
	v.cmd.Stderr = io.MultiWriter(stderr, cfg.Stderr)
	// snapshot=on puts the root disk's overlay in TMPDIR: the VM's own dir.
	v.cmd.Env = append(os.Environ(), "TMPDIR="+cfg.Dir)
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := startPinned(v.cmd, func(err error) { v.err = err; console.Close(); close(v.exited) }); err != nil {
		console.Close()
		v.fsd.stop()
		return nil, fmt.Errorf("microvm: start %s: %w", cfg.QEMU, err)
	}
	if err := v.connect(ctx, l); err != nil {
		v.kill()
		return nil, fmt.Errorf("microvm: %w (qemu: %s)", err, stderr.String())
	}
	return v, nil
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
// present), no default devices and no network
// device, the console to a log file, the guest's port to sock.
func (cfg *Config) args(sock string) []string {
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
	a := []string{"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-M", machine, "-accel", string(cfg.Accel), "-cpu", cpu,
		"-m", strconv.Itoa(cfg.MemoryMiB), "-smp", strconv.Itoa(cfg.CPUs),
		"-kernel", cfg.Kernel, "-initrd", cfg.Initramfs,
		"-append", "console=ttyS0 panic=-1 loglevel=4 -- guest --vm-init",
		"-chardev", "stdio,id=console,signal=off", // to console.log, capped (consoleFile)
		"-serial", "chardev:console",
		"-pidfile", filepath.Join(cfg.Dir, "qemu.pid"),
		"-device", "virtio-serial-" + bus + ",id=vser",
		"-chardev", "socket,id=guest,path=" + sock,
		"-device", "virtserialport,bus=vser.0,chardev=guest,name=" + vminit.PortName,
	}
	if cfg.Rootfs != "" {
		a = append(a, "-drive", "if=none,id=root,format=raw,snapshot=on,file="+cfg.Rootfs,
			"-device", "virtio-blk-"+bus+",drive=root")
	}
	if cfg.ConfigDisk != "" {
		a = append(a, "-drive", "if=none,id=config,format=raw,readonly=on,file="+cfg.ConfigDisk,
			"-device", "virtio-blk-"+bus+",drive=config,serial="+vminit.ConfigSerial)
	}
	if cfg.WorkspaceDir != "" {
		a = append(a, "-object", fmt.Sprintf("memory-backend-memfd,id=mem,size=%dM,share=on", cfg.MemoryMiB),
			"-chardev", "socket,id=fs,path="+fsSocket(cfg.Dir),
			"-device", "vhost-user-fs-"+bus+",chardev=fs,tag="+vminit.WorkspaceTag)
	}
	return a
}

// connect accepts QEMU's connection to the port's socket, waits for the
// guest's hello and its first answer.
func (v *VM) connect(ctx context.Context, l net.Listener) error {
	conn, err := v.accept(ctx, l)
	if err != nil {
		return err
	}
	v.sess, err = serialmux.Connect(ctx, conn)
	if err != nil {
		return err
	}
	v.client = guest.New(v.sess.Dial, "")
	if _, err := v.client.Health(ctx); err != nil {
		v.sess.Close()
		return fmt.Errorf("guest health: %w", err)
	}
	return nil
}

// accept waits for QEMU to connect, for ctx to end or for QEMU to exit.
func (v *VM) accept(ctx context.Context, l net.Listener) (net.Conn, error) {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	go func() {
		<-v.exited
		l.Close()
	}()
	c, err := l.Accept()
	if err == nil {
		return c, nil
	}
	select {
	case <-v.exited:
		return nil, fmt.Errorf("qemu exited: %v", v.err)
	default:
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	return nil, err
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
