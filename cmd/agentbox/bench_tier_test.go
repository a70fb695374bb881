package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/testenv"
)

// TestBenchTiers runs `agentbox bench` small on each tier: every row is
// there, the gvisor baselines run under runsc as its sandboxes do, and the
// idle memory of a sandbox (for microvm, QEMU's and virtiofsd's) and of a
// plain container is reported; an unknown tier is refused with exit 2.
func TestBenchTiers(t *testing.T) {
	testenv.DockerWithImage(t)
	t.Setenv("AGENTBOX_GUEST_BINARY", guestBinary)
	t.Setenv("AGENTBOX_DATA_DIR", t.TempDir())
	for iso, want := range map[string][]string{
		"container": {"Isolation container: sandboxes and baseline containers under the engine's default runtime.",
			"| exec round trip of `true` (unix socket) |", "`docker run --rm IMAGE true`"},
		"gvisor": {"Isolation gvisor: sandboxes and baseline containers under the runsc runtime.",
			"`docker run --runtime=runsc --rm IMAGE true`", "runsc-sandbox", "runsc-gofer"},
		"microvm": {"Isolation microvm: sandboxes are QEMU VMs (accel ", "`docker run --rm IMAGE true`",
			"| agentbox sandbox (after its first exec) | – | ", "qemu-system-x86_64, virtiofsd |"},
	} {
		t.Run(iso, func(t *testing.T) {
			out, errOut, err := run(t.Context(), "bench", "--isolation", iso, "--creates", "1", "--execs", "4", "--files", "1", "--no-workspace")
			if iso != "container" && errors.Is(err, sandbox.ErrIsolationUnavailable) {
				testenv.Missing(t, "the "+iso+" tier", err.Error())
			}
			if err != nil {
				t.Fatalf("bench --isolation %s: %v\n%s%s", iso, err, out, errOut)
			}
			for _, w := range append(want, "| sandbox create → first exec returns |", "| create → exec → destroy |",
				"| 1 MiB file written then read back |", "| `python3 -c pass` start |", "`docker exec CONTAINER python3 -c pass`",
				"| agentbox sandbox (after its first exec) | ", "| plain container (`sleep 3600`) | ") {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "| 1 GiB written") || strings.Contains(out, "| 0.0 MiB |") {
				t.Errorf("--no-workspace ran the workspace rows, or a memory is zero:\n%s", out)
			}
		})
	}
	_, _, err := run(t.Context(), "bench", "--isolation", "hyperv", "--creates", "1")
	if exitCodeOf(err) != 2 || !strings.Contains(err.Error(), "hyperv") {
		t.Errorf("bench --isolation hyperv: %v (exit %d), want exit 2 and the reason", err, exitCodeOf(err))
	}
}
