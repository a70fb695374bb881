package sandbox_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/sandbox"
)

// TestParseDisplay: WIDTHxHEIGHT within the bounds a spec's display has.
func TestParseDisplay(t *testing.T) {
	if d, err := sandbox.ParseDisplay("1024x768"); err != nil || d != (sandbox.Display{Width: 1024, Height: 768}) {
		t.Fatalf("1024x768: %+v %v", d, err)
	}
	if _, err := sandbox.ParseDisplay("big"); err == nil || !strings.Contains(err.Error(), "want WIDTHxHEIGHT") {
		t.Errorf("big: %v", err)
	}
	if _, err := sandbox.ParseDisplay("100x100"); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Errorf("100x100: %v, want ErrInvalidSpec", err)
	}
}
