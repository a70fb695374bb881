package kvmprobe

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// needKVM skips when this host has no /dev/kvm to run guests on.
func needKVM(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(Device); err != nil {
		t.Skipf("no %s on this host: %v", Device, err)
	}
}

// TestProbe runs the real probe: it may say Ran only with no failed step,
// and any other stage names the step that failed and why.
func TestProbe(t *testing.T) {
	needKVM(t)
	r, err := Probe(context.Background())
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	t.Logf("this host: stage %d, reason %q, took %v", r.Stage, r.Reason(), r.Took)
	switch {
	case r.Stage == Ran && (r.Step != "" || r.Err != nil || r.Took <= 0):
		t.Errorf("Ran with a failed step: %+v", r)
	case r.Stage != Ran && (r.Step == "" || r.Err == nil):
		t.Errorf("stage %d without the step that failed: %+v", r.Stage, r)
	}
}

// TestProbeWantsTheGuestsExits runs guests that do not do what the test
// guest does: the probe must not say they ran.
func TestProbeWantsTheGuestsExits(t *testing.T) {
	needKVM(t)
	if r, _ := Probe(context.Background()); r.Stage < CannotRun {
		t.Skipf("cannot create a VM here: %s", r.Reason())
	}
	for _, c := range []struct {
		name string
		code []byte
		want string
	}{
		{"halts at once", []byte{0xF4}, "KVM_RUN: exit HLT, want IO"},
		{"writes 43", []byte{0xB0, 43, 0xE6, outPort, 0xF4}, "KVM_RUN: IO exit: the guest wrote 43, want 42"},
		{"writes to port 0x11", []byte{0xB0, outValue, 0xE6, 0x11, 0xF4}, "KVM_RUN: IO exit: direction 1 size 1 port 0x11"},
		{"goes on after the write", []byte{0xB0, outValue, 0xE6, outPort, 0xE6, outPort, 0xF4}, "KVM_RUN: exit IO, want HLT"},
	} {
		r, err := probe(context.Background(), Device, c.code, Timeout)
		if err != nil || r.Stage != CannotRun || !strings.HasPrefix(r.Reason(), c.want) {
			t.Errorf("%s: %+v (%q), %v; want CannotRun, %q", c.name, r, r.Reason(), err, c.want)
		}
	}
}

// TestProbeTimesOut runs a guest that loops forever: the probe answers at
// its deadline and stops the vCPU.
func TestProbeTimesOut(t *testing.T) {
	needKVM(t)
	if r, _ := Probe(context.Background()); r.Stage != Ran {
		t.Skipf("no guest runs here: %s", r.Reason())
	}
	start := time.Now()
	r, err := probe(context.Background(), Device, []byte{0xEB, 0xFE}, 200*time.Millisecond) // jmp $
	if err != nil || r.Stage != CannotRun || !errors.Is(r.Err, ErrTimedOut) {
		t.Fatalf("looping guest: %+v, %v; want CannotRun, timed out", r, err)
	}
	// stop waits for the vCPU's exit for up to a second: 200ms and a
	// quick exit is well under.
	if took := time.Since(start); took > time.Second {
		t.Errorf("the probe answered after %v: the vCPU did not stop", took)
	}
	if got := r.Reason(); got != "KVM_RUN: timed out after 200ms" {
		t.Errorf("Reason = %q", got)
	}
}

func TestProbeWithoutKVM(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "kvm")
	if r, err := probe(context.Background(), missing, code, Timeout); err != nil || r.Stage != NoDevice {
		t.Errorf("missing device: %+v, %v; want NoDevice", r, err)
	}
	// /dev/null opens but is not KVM: its ioctls fail with ENOTTY.
	r, err := probe(context.Background(), os.DevNull, code, Timeout)
	if err != nil || r.Stage != CannotCreateVM || !strings.HasPrefix(r.Reason(), "KVM_GET_API_VERSION: ENOTTY") {
		t.Errorf("/dev/null: %+v (%q), %v; want CannotCreateVM at KVM_GET_API_VERSION: ENOTTY", r, r.Reason(), err)
	}
}
