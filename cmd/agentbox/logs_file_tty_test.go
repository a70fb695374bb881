package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/testenv"
)

// TestLogsToAFileIsPlainText: `agentbox logs JOB > file` (the built
// binary, its stderr a real terminal) saves what the job printed as its
// help says: no escape byte, carriage return or spinner in the file, while
// the terminal shows the spinner and the steps.
func TestLogsToAFileIsPlainText(t *testing.T) {
	e := clientEnv(t)
	id := e.Submit("print in colour").ID
	e.Start(id)
	e.Emit(id, event.Command{Command: "pytest -q"})
	e.Emit(id, event.Output{Stream: "stdout", Text: "\x1b[31mFAILED\x1b[0m test_x\r\n\x1b]0;title\x07collected\n"})
	file := filepath.Join(t.TempDir(), "out.txt")
	tty := testenv.StartTmux(t, 100, 20, nil, "sh", "-c", "exec "+guestBinary+" logs "+id+" > "+file)
	tty.WaitFor("the spinner", 30*time.Second, func(s string) bool { return strings.Contains(s, "Ctrl-C stops following") })
	e.Emit(id, event.Output{Stream: "stdout", Text: "done 50%\rdone 100%\r\n2 passed\n"})
	e.Emit(id, event.Exit{ExitCode: 0, DurationMS: 7})
	e.Finish(id, store.StatusComplete, "")
	// The pane may show the last lines a moment after the process ended.
	screen := tty.WaitFor("logs to end and its last line on the screen", 30*time.Second, func(s string) bool {
		_, done := tty.Exited()
		return done && strings.Contains(s, "[complete]")
	})
	if code, _ := tty.Exited(); code != 0 {
		t.Errorf("exit %d; the screen:\n%s", code, screen)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if strings.ContainsAny(got, "\x1b\r\x07") || strings.ContainsAny(got, strings.Join(spinnerFrames(), "")) || strings.Contains(got, "Ctrl-C") {
		t.Errorf("the file holds escapes or the spinner: %q", got)
	}
	for _, want := range []string{"FAILED", " test_x\n", "collected\n", "done 100%", "2 passed\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("the file lacks %q: %q", want, got)
		}
	}
	for _, want := range []string{"$ pytest -q", "[exit 0 after 7ms]", "[complete]"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the terminal lacks %q:\n%s", want, screen)
		}
		if strings.Contains(got, want) {
			t.Errorf("the file holds the step %q: %q", want, got)
		}
	}
}

// spinnerFrames are the glyphs of render.Live's spinner.
func spinnerFrames() []string {
	return []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
}
