package agent

import (
	"slices"
	"testing"

	"github.com/agentbox/agentbox/internal/agent/tools"
)

// TestUsesDesktop: an agent with the computer or python tool makes its
// jobs wait for the desktop image layer; one without either does not.
func TestUsesDesktop(t *testing.T) {
	if !New(Config{}).UsesDesktop() {
		t.Error("the default tools include computer and python, yet UsesDesktop is false")
	}
	coding := slices.DeleteFunc(tools.Default(), func(t tools.Tool) bool {
		n := t.Spec().Name
		return n == tools.NameComputer || n == tools.NamePython
	})
	if New(Config{Tools: coding}).UsesDesktop() {
		t.Error("an agent without the computer and python tools uses the desktop")
	}
}
