package doctor

import (
	"context"
	"fmt"

	"github.com/agentbox/agentbox/internal/sandbox/microvm/kvmprobe"
)

const (
	kvmUnavailable = ": microVM sandboxes unavailable; containers work"
	kvmLoad        = "enable virtualization (nested virtualization on a VM) and load kvm: sudo modprobe kvm_intel || sudo modprobe kvm_amd"
	kvmNested      = "enable nested virtualization for this VM (on the host: kvm_intel nested=1 or kvm_amd nested=1, and expose VMX/SVM to the guest)"
)

// kvmCheck says /dev/kvm is usable only once a test guest has run on it.
func kvmCheck(ctx context.Context) Check {
	r, err := kvmprobe.Probe(ctx)
	if err != nil {
		return Check{"kvm", Warn, "not probed: " + err.Error(), ""}
	}
	return kvmResultCheck(r)
}

// kvmResultCheck is the check a probe's result makes: what was tried and
// where it stopped.
func kvmResultCheck(r kvmprobe.Result) Check {
	dev := kvmprobe.Device
	switch r.Stage {
	case kvmprobe.Ran:
		return Check{"kvm", OK, fmt.Sprintf("%s runs guests (a test guest ran in %.1f ms)", dev, float64(r.Took.Microseconds())/1000), ""}
	case kvmprobe.NoDevice:
		return Check{"kvm", Warn, dev + " does not exist" + kvmUnavailable, kvmLoad}
	case kvmprobe.CannotOpen:
		fix := kvmLoad
		if r.Permission() {
			fix = "sudo usermod -aG kvm $USER   (then log in again)"
		}
		return Check{"kvm", Warn, dev + " does not open (" + r.Err.Error() + ")" + kvmUnavailable, fix}
	}
	return Check{"kvm", Warn, dev + " opens, cannot run guests (" + r.Reason() + ")" + kvmUnavailable, kvmNested}
}
