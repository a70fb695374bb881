package docker

import (
	"testing"

	"github.com/agentbox/agentbox/internal/seccomp"
)

// TestSeccompOpt checks that the security option carries internal/seccomp's
// profile, the one a microVM's guest compiles, compacted.
func TestSeccompOpt(t *testing.T) {
	if seccompOpt != "seccomp="+compactJSON(seccomp.JSON) {
		t.Errorf("seccompOpt is not the compacted profile: %.80q", seccompOpt)
	}
}
