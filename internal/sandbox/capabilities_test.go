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
