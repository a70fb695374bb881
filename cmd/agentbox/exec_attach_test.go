package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/wiring"
)

// TestExecFailedShowsTheGuestsWordsInert: a guest that fails its health
// checks chooses the last check's error, which exec quotes when it gives
// up on the sandbox; an OSC 52 in it must not set the user's clipboard.
func TestExecFailedShowsTheGuestsWordsInert(t *testing.T) {
	hostile := &guest.Error{Code: guest.CodeInternal, Message: "down\x1b]52;c;cm0gLXJmIH4=\x07\r\x1b[2K"}
	err := fmt.Errorf("exec: %w", fmt.Errorf("%w (3 health checks in a row failed, the last: %w)", wiring.ErrStoppedAnswering, hostile))
	var b bytes.Buffer
	code, rerr := execFailed(&b, err, false)
	var ee exitError
	if !errors.As(exitWith(code, rerr), &ee) || ee.code != 1 {
		t.Errorf("execFailed = %d, %v; want exit 1", code, rerr)
	}
	if strings.ContainsAny(b.String(), "\x1b\x07\r") || !strings.Contains(b.String(), "stopped answering") {
		t.Errorf("stderr %q: want the error with its controls shown, not acted on", b.String())
	}
}
