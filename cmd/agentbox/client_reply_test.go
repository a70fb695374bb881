package main

import (
	"context"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/store"
)

// TestReplyCommand: reply continues an ended job and, with --follow,
// streams the new turn from the message to its end; a message of - is
// read from stdin; a refused message is an error naming the problem.
func TestReplyCommand(t *testing.T) {
	e := clientEnv(t)
	id := e.Submit("x").ID
	e.Start(id)
	e.Finish(id, store.StatusComplete, "")
	progressOnFollow(t, e, store.StatusComplete)
	out, errOut := mustRun(t, "reply", "-f", id, "now add tests")
	if out != "hello\n" {
		t.Errorf("stdout = %q, want the new turn's output only", out)
	}
	for _, want := range []string{"sent to " + id + " (turn 2, pending)", "» message (turn 2): now add tests", "[complete]"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Count(errOut, "[complete]") != 1 {
		t.Errorf("stderr shows the first turn too:\n%s", errOut)
	}
	out, _, err := runClient(context.Background(), "and a changelog\n", "reply", id, "-")
	if err != nil || out != id+": message sent (turn 3, pending)\n" {
		t.Errorf("reply from stdin: %q, %v", out, err)
	}
	if _, _, err := runClient(context.Background(), "", "reply", id, " "); err == nil || !strings.Contains(err.Error(), "message is empty") {
		t.Errorf("a blank message: %v", err)
	}
}
