package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/sandbox/microvm/kvmprobe"
)

func TestKVMResultCheck(t *testing.T) {
	for _, c := range []struct {
		r          kvmprobe.Result
		status     string
		detail     string
		fixContain string
	}{
		{kvmprobe.Result{Stage: kvmprobe.Ran, Took: 3250 * time.Microsecond}, OK,
			"/dev/kvm runs guests (a test guest ran in 3.2 ms)", ""},
		{kvmprobe.Result{Stage: kvmprobe.NoDevice, Step: "stat /dev/kvm", Err: fs.ErrNotExist}, Warn,
			"/dev/kvm does not exist: microVM sandboxes unavailable; containers work", "modprobe"},
		{kvmprobe.Result{Stage: kvmprobe.CannotOpen, Step: "open /dev/kvm", Err: unix.EACCES}, Warn,
			"/dev/kvm does not open (permission denied): microVM sandboxes unavailable; containers work", "usermod -aG kvm"},
		{kvmprobe.Result{Stage: kvmprobe.CannotOpen, Step: "open /dev/kvm", Err: unix.ENXIO}, Warn,
			"/dev/kvm does not open (no such device or address): microVM sandboxes unavailable; containers work", "modprobe"},
		{kvmprobe.Result{Stage: kvmprobe.CannotCreateVM, Step: "KVM_CREATE_VM", Err: unix.EINVAL}, Warn,
			"/dev/kvm opens, cannot run guests (KVM_CREATE_VM: EINVAL (invalid argument)): microVM sandboxes unavailable; containers work", "nested virtualization"},
		{kvmprobe.Result{Stage: kvmprobe.CannotRun, Step: "KVM_RUN", Err: errors.New("exit FAIL_ENTRY, hardware entry failure reason 0x7, want IO")}, Warn,
			"/dev/kvm opens, cannot run guests (KVM_RUN: exit FAIL_ENTRY, hardware entry failure reason 0x7, want IO): microVM sandboxes unavailable; containers work", "nested virtualization"},
		{kvmprobe.Result{Stage: kvmprobe.CannotRun, Step: "KVM_RUN", Err: fmt.Errorf("%w after 2s", kvmprobe.ErrTimedOut)}, Warn,
			"/dev/kvm opens, cannot run guests (KVM_RUN: timed out after 2s): microVM sandboxes unavailable; containers work", "nested virtualization"},
	} {
		got := kvmResultCheck(c.r)
		if got.Name != "kvm" || got.Status != c.status || got.Detail != c.detail || !strings.Contains(got.Fix, c.fixContain) || (c.fixContain == "") != (got.Fix == "") {
			t.Errorf("kvmResultCheck(%+v) = %+v, want %s %q, fix with %q", c.r, got, c.status, c.detail, c.fixContain)
		}
	}
}

// TestKVMCheck runs the real probe: the check says OK only when the
// probe's test guest ran.
func TestKVMCheck(t *testing.T) {
	if _, err := os.Stat(kvmprobe.Device); err != nil {
		t.Skipf("no %s on this host: %v", kvmprobe.Device, err)
	}
	r, err := kvmprobe.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := kvmCheck(context.Background())
	t.Logf("this host: %s %s", c.Status, c.Detail)
	if (c.Status == OK) != (r.Stage == kvmprobe.Ran) {
		t.Errorf("kvmCheck = %+v for a probe at stage %d (%s)", c, r.Stage, r.Reason())
	}
	if c.Status != OK && !strings.HasPrefix(c.Detail, "/dev/kvm opens, cannot run guests (") && !strings.HasPrefix(c.Detail, "/dev/kvm does not open") {
		t.Errorf("kvmCheck = %+v: says neither what ran nor where it stopped", c)
	}
}
