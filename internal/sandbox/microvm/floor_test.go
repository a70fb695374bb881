package microvm_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/diskusage"
	"github.com/agentbox/agentbox/internal/sandbox/microvm"
	"github.com/agentbox/agentbox/internal/testenv"
)

// TestFreeFloor: no VM starts while the filesystem of its state dir or
// workspace is below the free-space or free-inodes floor, as on the
// container tier; the check comes before anything is built or booted.
func TestFreeFloor(t *testing.T) {
	testenv.Tool(t, "qemu-system-x86_64", microvm.Install)
	for _, tt := range []struct {
		floor diskusage.Floor
		names string
	}{
		{diskusage.Floor{Bytes: 1 << 60}, "AGENTBOX_MIN_FREE_DISK"},
		{diskusage.Floor{Inodes: 1 << 60}, "AGENTBOX_MIN_FREE_INODES"},
	} {
		t.Run(tt.names, func(t *testing.T) {
			dir := t.TempDir()
			d, err := microvm.NewDriver(microvm.DriverConfig{StateDir: dir, Image: testenv.Image(), GuestBinary: guestBin, MinFree: tt.floor})
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Available(context.Background()); err != nil {
				t.Skipf("skipping: %v", err)
			}
			// An image that does not exist: were the floor not checked first,
			// Create would fail on it, not boot a VM.
			_, err = sandbox.Start(context.Background(), d, sandbox.Spec{Image: "agentbox-test-no-such-image:0"}, sandbox.Binding{WorkspaceDir: t.TempDir()})
			if !errors.Is(err, sandbox.ErrNoSpace) || !strings.Contains(err.Error(), tt.names) {
				t.Fatalf("err = %v, want ErrNoSpace naming %s", err, tt.names)
			}
		})
	}
}
