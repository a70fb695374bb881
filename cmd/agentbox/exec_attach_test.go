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

func TestMaxOutputFlag(t *testing.T) {
	for _, tt := range []struct {
		flag       string
		onTerminal bool
		want       int64
		bad        bool
	}{
		{"", false, 0, false},
		{"", true, 10 << 20, false},
		{"0", true, 0, false},
		{"100k", false, 100 << 10, false},
		{"1g", true, 1 << 30, false},
		{"lots", false, 0, true},
		{"-1", false, 0, true},
	} {
		got, err := parseMaxOutput(tt.flag, tt.onTerminal)
		if got != tt.want || (err != nil) != tt.bad {
			t.Errorf("parseMaxOutput(%q, %v) = %d, %v", tt.flag, tt.onTerminal, got, err)
		}
	}
}

// TestCapWriterKeepsTheFirstBytes: the bytes within the cap pass whole,
// across writes; the write that passes it fails with the reason.
func TestCapWriterKeepsTheFirstBytes(t *testing.T) {
	var out bytes.Buffer
	w := &capWriter{w: &out, max: 10}
	if n, err := w.Write([]byte("12345678")); n != 8 || err != nil {
		t.Fatalf("within the cap: %d, %v", n, err)
	}
	n, err := w.Write([]byte("abcd"))
	var cut *outputCutError
	if n != 2 || !errors.As(err, &cut) || out.String() != "12345678ab" {
		t.Fatalf("past the cap: %d, %v, %q", n, err, out.String())
	}
	if got := (&outputCutError{max: 10 << 20}).Error(); got != "output cut at 10 MiB (--max-output); rerun with --max-output 0 for all of it" {
		t.Errorf("reason %q", got)
	}
	if sizeName(1500) != "1500 bytes" || sizeName(3<<10) != "3 KiB" {
		t.Errorf("sizeName: %q, %q", sizeName(1500), sizeName(3<<10))
	}
}

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
