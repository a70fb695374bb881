package sandbox_test

import (
	"testing"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// TestLimitsDefaults: a spec's zero limits take the driver's defaults
// (Or), and the driver's own zero defaults the settings' (FillDefaults).
func TestLimitsDefaults(t *testing.T) {
	def := sandbox.Limits{MemoryBytes: 1 << 30, NanoCPUs: 2e9, PidsLimit: 64, DiskBytes: 5 << 30, NoFile: 512}
	got := sandbox.Limits{PidsLimit: 99, NoFile: 2048}.Or(def)
	if want := (sandbox.Limits{MemoryBytes: 1 << 30, NanoCPUs: 2e9, PidsLimit: 99, DiskBytes: 5 << 30, NoFile: 2048}); got != want {
		t.Errorf("Or = %+v, want %+v", got, want)
	}
	var l sandbox.Limits
	l.NanoCPUs = -1
	l.FillDefaults()
	s := config.Default().Sandbox
	if want := (sandbox.Limits{MemoryBytes: s.MemoryBytes, NanoCPUs: s.NanoCPUs, PidsLimit: s.PidsLimit, DiskBytes: s.DiskBytes, NoFile: s.NoFile}); l != want {
		t.Errorf("FillDefaults = %+v, want the settings' %+v", l, want)
	}
	if l.MemoryBytes != 2<<30 || l.NanoCPUs != 1e9 || l.PidsLimit != 512 || l.DiskBytes != 10<<30 || l.NoFile != 1024 {
		t.Errorf("FillDefaults = %+v, not the documented 2 GiB, 1 CPU, 512, 10 GiB, 1024", l)
	}
}
