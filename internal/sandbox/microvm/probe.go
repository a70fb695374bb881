package microvm

import (
	"context"
	"fmt"
	"os"
	"time"
)

// Probed is what Probe found: the tier's VMs boot here.
type Probed struct {
	// Accel is the accelerator, and WhyTCG why not KVM (empty under KVM).
	Accel  Accel
	WhyTCG string
	// Kernel is the guest kernel's release.
	Kernel string
	// Boot is how long the VM took to answer.
	Boot time.Duration
}

// Probe says whether the tier works here: what Available checks, then a
// VM booted from the kernel and the initramfs alone (no root file system:
// building one from the image takes most of a minute, at the first
// sandbox) until its guest answers, then stopped. QEMU runs as a
// sandbox's does: as a uid of its own, under its seccomp filter.
func (d *Driver) Probe(ctx context.Context) (Probed, error) {
	if err := d.Available(ctx); err != nil {
		return Probed{}, err
	}
	k, initrd, err := d.bootAssets(ctx)
	if err != nil {
		return Probed{}, err
	}
	p := Probed{Kernel: k.Release}
	p.Accel, p.WhyTCG = ChooseAccel(ctx, d.cfg.QEMU, k.Image)
	dir, err := os.MkdirTemp("", "agentbox-vmprobe-")
	if err != nil {
		return p, fmt.Errorf("probe: %w", err)
	}
	defer os.RemoveAll(dir)
	uid, err := d.allocUID()
	if err != nil {
		return p, fmt.Errorf("probe: %w", err)
	}
	defer releaseUID(uid)
	begin := time.Now()
	// As a sandbox's QEMU runs: unprivileged, under its seccomp filter.
	vm, err := Start(ctx, Config{QEMU: d.cfg.QEMU, Kernel: k.Image, Initramfs: initrd, Accel: p.Accel, Dir: dir, UID: uid})
	if err != nil {
		return p, fmt.Errorf("probe: %w%s", err, consoleTail(dir))
	}
	p.Boot = time.Since(begin)
	_ = vm.Close(ctx, shutdownGrace)
	return p, nil
}
