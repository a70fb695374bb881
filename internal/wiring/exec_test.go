package wiring

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/guest"
)

// TestExecFailedShowsTheGuestsWordsInert: a guest that fails its health
// checks chooses the last check's error, which exec quotes when it gives
// up on the sandbox; an OSC 52 in it must not set the user's clipboard.
func TestExecFailedShowsTheGuestsWordsInert(t *testing.T) {
	hostile := &guest.Error{Code: guest.CodeInternal, Message: "down\x1b]52;c;cm0gLXJmIH4=\x07\r\x1b[2K"}
	err := fmt.Errorf("exec: %w", fmt.Errorf("%w (3 health checks in a row failed, the last: %w)", ErrStoppedAnswering, hostile))
	var b bytes.Buffer
	code, rerr := ExecFailed(&b, err, false)
	if code != 1 || rerr != nil {
		t.Errorf("ExecFailed = %d, %v; want exit 1", code, rerr)
	}
	if strings.ContainsAny(b.String(), "\x1b\x07\r") || !strings.Contains(b.String(), "stopped answering") {
		t.Errorf("stderr %q: want the error with its controls shown, not acted on", b.String())
	}
}

// TestExitStatusIsAProcessStatus: a code the guest reports that no
// process exits with (256, -1) is exit 1, never what os.Exit makes of it
// (256 is 0, success).
func TestExitStatusIsAProcessStatus(t *testing.T) {
	for code, want := range map[int]int{0: 0, 3: 3, 137: 137, 255: 255, 256: 1, -1: 1, 1 << 20: 1} {
		var stderr strings.Builder
		if got := exitStatus(&stderr, code); got != want {
			t.Errorf("exitStatus(%d) = %d, want %d", code, got, want)
		}
		if (want != code) != strings.Contains(stderr.String(), "no process exits with") {
			t.Errorf("exitStatus(%d) said %q", code, stderr.String())
		}
	}
}
