package sandbox_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/sandbox"
)

func TestCheckNetwork(t *testing.T) {
	c := sandbox.Capabilities{Networks: []string{"none", "bridge"}, NamedNetworks: true}
	for _, mode := range []string{"", "none", "bridge", "agents"} {
		if err := c.CheckNetwork(mode); err != nil {
			t.Errorf("%q refused: %v", mode, err)
		}
	}
	for _, mode := range []string{"host", "container:abc", "ns:/proc/1/ns/net"} {
		if err := c.CheckNetwork(mode); !errors.Is(err, sandbox.ErrInvalidSpec) || !strings.Contains(err.Error(), "are refused") {
			t.Errorf("%q: %v, want ErrInvalidSpec", mode, err)
		}
	}
	vm := sandbox.Capabilities{Networks: []string{"none"}}
	if err := vm.CheckNetwork("agents"); err == nil || !strings.Contains(err.Error(), "use none (") {
		t.Errorf("a named network where none are: %v", err)
	}
}

// TestCheckIsolationQuotesLittle: the refusal of an unknown tier quotes
// a bounded part of it: a client's 1 MiB value came back whole in the
// 400 and in the server's log.
func TestCheckIsolationQuotesLittle(t *testing.T) {
	err := sandbox.CheckIsolation(strings.Repeat("a", 1<<20))
	if err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), "use container, gvisor, microvm") {
		t.Fatalf("CheckIsolation: %d bytes: %.300v", len(err.Error()), err)
	}
}

func TestLimitsFillDefaults(t *testing.T) {
	l := sandbox.Limits{MemoryBytes: 1 << 30, PidsLimit: -1}
	l.FillDefaults()
	if want := (sandbox.Limits{MemoryBytes: 1 << 30, NanoCPUs: 1e9, PidsLimit: 512, DiskBytes: 10 << 30, NoFile: 1024}); l != want {
		t.Errorf("got %+v, want %+v", l, want)
	}
}
