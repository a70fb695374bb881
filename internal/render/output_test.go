package render

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/event"
)

// ttyBuffer is a buffer that says it is a terminal.
type ttyBuffer struct{ bytes.Buffer }

func (*ttyBuffer) Terminal() bool { return true }

// TestLiveOutput: a call's output is shown under its step as it arrives,
// line by line whatever the chunks, stderr marked apart; its result then
// shows only how the command ended, without <stdout>/<stderr> tags.
func TestLiveOutput(t *testing.T) {
	var out, errw bytes.Buffer
	s := NewSteps(&out, &errw)
	show := func(p event.Payload) {
		t.Helper()
		if err := s.Payload(p); err != nil {
			t.Fatal(err)
		}
	}
	show(event.ToolCall{ID: "c1", Name: "bash", Input: []byte(`{"command":"make"}`)})
	show(event.Output{Call: "c1", Stream: "stdout", Text: "building\none"})
	show(event.Output{Call: "c1", Stream: "stdout", Text: " two\n"})
	show(event.Output{Call: "c1", Stream: "stderr", Text: "warning: \x1b[2Jx\n"})
	show(event.Output{Call: "c1", Stream: "stdout", Text: "cut"})
	show(event.ToolResult{ID: "c1", Name: "bash", IsError: true, DurationMS: 2100,
		Text: "exit code: 137 (killed by SIGKILL)\ntimed out after 2s and was killed, with every process it started; the output up to then is below. Raise timeout_seconds (up to 1800).\n<stdout>\nbuilding\none two\ncut\n</stdout>\n<stderr>\nwarning: x\n</stderr>\n"})
	want := "  │ building\n  │ one two\n  ! warning: [2Jx\n  │ cut\n  ✗ exit 137 (killed by SIGKILL) · timed out after 2s · 2s\n"
	if out.String() != want {
		t.Errorf("stdout:\n%q\nwant\n%q", out.String(), want)
	}
	if errw.String() != "$ make\n" {
		t.Errorf("stderr: %q", errw.String())
	}
}

// TestExecResultWithoutLiveOutput: a command's result whose output was not
// shown as it ran (an older log, output past the job's cap) shows it
// without tags, stderr marked apart, then the line of how it ended; a
// step cut short says why in its own words.
func TestExecResultWithoutLiveOutput(t *testing.T) {
	tests := []struct{ text, want string }{
		{"exit code: 0 (success)\n<stdout>\nhello\n</stdout>\n<stderr>\noops\n</stderr>\n",
			"  │ hello\n  ! oops\n  ✓ exit 0 (success)\n"},
		{"exit code: 0 (success)\n(no output)\n", "  ✓ exit 0 (success)\n"},
		{"not completed: job timed out after 5s\n<stdout>\nstart\n</stdout>\n", "  │ start\n  ✗ not completed: job timed out after 5s\n"},
		{"exit code: 1 (failure)\n<stderr>\nno\n</stderr>\n\nthe proxy refused example.com:443", "  ! no\n  ✓ exit 1 (failure)\n\n  the proxy refused example.com:443\n"},
		{"plain text", "  │ plain text\n"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		s := NewSteps(&out, &bytes.Buffer{})
		if err := s.Payload(event.ToolResult{ID: "x", Name: "bash", Text: tt.text}); err != nil {
			t.Fatal(err)
		}
		if out.String() != tt.want {
			t.Errorf("result %q:\n%q\nwant\n%q", tt.text, out.String(), tt.want)
		}
		if strings.Contains(out.String(), "<std") {
			t.Errorf("tags shown: %q", out.String())
		}
	}
}

// TestPythonResultWithoutTags: the python tool's result shows its
// stderr section marked apart, without the tags.
func TestPythonResultWithoutTags(t *testing.T) {
	var out bytes.Buffer
	s := NewSteps(&out, &bytes.Buffer{})
	_ = s.Payload(event.ToolResult{ID: "p", Name: "python", Text: "hello\n<stderr>\nDeprecationWarning: x\n</stderr>\nOut[3]: 42\n"})
	if want := "  │ hello\n  ! DeprecationWarning: x\n  │ Out[3]: 42\n"; out.String() != want {
		t.Errorf("%q\nwant %q", out.String(), want)
	}
}

// TestStderrRedOnTerminal: on a terminal stderr's lines are red; off one
// no escape byte is written.
func TestStderrRedOnTerminal(t *testing.T) {
	t.Setenv("TERM", "xterm")
	t.Setenv("NO_COLOR", "")
	os.Unsetenv("NO_COLOR") // restored by Setenv's cleanup
	var tty ttyBuffer
	s := NewSteps(&tty, &bytes.Buffer{})
	_ = s.Payload(event.Output{Call: "c", Stream: "stderr", Text: "bad\n"})
	_ = s.Payload(event.Output{Call: "c", Stream: "stdout", Text: "good\n"})
	if want := "  ! " + red + "bad" + reset + "\n  │ good\n"; tty.String() != want {
		t.Errorf("on a terminal: %q, want %q", tty.String(), want)
	}
}
