package microvm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/capped"
	"github.com/agentbox/agentbox/internal/sandbox/microvm/kvmprobe"
)

// Accel is how QEMU runs the guest's CPU.
type Accel string

// The accelerators: KVM (hardware virtualization) or TCG (QEMU's own
// translation, slower but available everywhere).
const (
	KVM Accel = "kvm"
	TCG Accel = "tcg"
)

// kvmChoice remembers ChooseAccel's answer per QEMU and kernel: the host
// does not change while agentbox runs.
var kvmChoice sync.Map // [2]string -> accelChoice

type accelChoice struct {
	accel Accel
	why   string
}

// ChooseAccel returns KVM if this host's KVM runs QEMU guests, else TCG
// and why not. A /dev/kvm that opens proves little (nested KVM may open
// and create VMs, yet QEMU aborts setting an MSR or its guest never runs),
// so after kvmprobe's own guest has run, the kernel is booted under QEMU
// with KVM for as long as it takes to print its first console line.
func ChooseAccel(ctx context.Context, qemu, kernel string) (Accel, string) {
	key := [2]string{qemu, kernel}
	if c, ok := kvmChoice.Load(key); ok {
		return c.(accelChoice).accel, c.(accelChoice).why
	}
	c := chooseAccel(ctx, qemu, kernel)
	if ctx.Err() == nil {
		kvmChoice.Store(key, c)
	}
	return c.accel, c.why
}

func chooseAccel(ctx context.Context, qemu, kernel string) accelChoice {
	if err := kvmOpenToGroup(); err != nil {
		return accelChoice{TCG, err.Error()}
	}
	r, err := kvmprobe.Probe(ctx)
	if err != nil {
		return accelChoice{TCG, "kvm probe: " + err.Error()}
	}
	if r.Stage != kvmprobe.Ran {
		return accelChoice{TCG, "/dev/kvm cannot run guests: " + r.Reason()}
	}
	if err := qemuRunsKVM(ctx, qemu, kernel); err != nil {
		return accelChoice{TCG, "QEMU cannot run guests with KVM here: " + err.Error()}
	}
	return accelChoice{KVM, ""}
}

// kvmOpenToGroup says whether QEMU, run as a VM's own uid with the kvm
// group (Config.credential), can open /dev/kvm: the probes run as root,
// and where /dev/kvm is root's alone (no udev rule, no kvm group) every
// VM failed to start ("Could not access KVM kernel module: Permission
// denied").
func kvmOpenToGroup() error {
	fi, err := os.Stat("/dev/kvm")
	if err != nil {
		return fmt.Errorf("no /dev/kvm: %w", err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Mode&0o006 == 0o006 {
		return nil
	}
	if g, err := user.LookupGroup("kvm"); err == nil && strconv.Itoa(int(st.Gid)) == g.Gid && st.Mode&0o060 == 0o060 {
		return nil
	}
	return fmt.Errorf("/dev/kvm (mode %o, gid %d) is not open to the kvm group, and QEMU runs as the VM's own uid", st.Mode&0o777, st.Gid)
}

// qemuRunsKVM boots kernel under QEMU with KVM and waits up to 3 s for its
// first console output.
func qemuRunsKVM(ctx context.Context, qemu, kernel string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, "-nodefaults", "-no-user-config", "-display", "none",
		"-M", "microvm", "-accel", "kvm", "-cpu", "host", "-m", "128", "-no-reboot",
		"-serial", "stdio", "-kernel", kernel, "-append", "console=ttyS0 panic=-1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr := capped.Buffer{Max: 4 << 10}
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	n, _ := out.Read(make([]byte, 1))
	if n == 1 {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("no console output in 3s under KVM")
	}
	return fmt.Errorf("qemu exited: %s", stderr.String())
}
