package main

import (
	"bytes"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// noModelEnv leaves a server with the model agent and no model, whatever
// the environment the tests run in sets.
var noModelEnv = []string{"AGENTBOX_AGENT=model", "ANTHROPIC_API_KEY=", "OPENAI_API_KEY=", "OPENAI_BASE_URL=", "AGENTBOX_MODEL="}

// TestSubmitWithoutModel: a server with no model refuses an agent job at
// submit (400 no_model) and `agentbox submit` prints what the operator
// sets and exits non-zero; a shell-agent server, which needs no model,
// takes the same task.
func TestSubmitWithoutModel(t *testing.T) {
	t.Parallel()
	s := newServer(t, noModelEnv...)
	s.start()
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if code := s.do("POST", "/v1/jobs", map[string]any{"task": "hello"}, &e); code != http.StatusBadRequest || e.Error.Code != "no_model" {
		t.Fatalf("submit: %d %+v, want 400 no_model", code, e)
	}

	cmd := exec.Command(guestBinary, "submit", "hello")
	cmd.Env = append(s.env, "AGENTBOX_URL="+s.url)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("agentbox submit: %v, want a non-zero exit\n%s%s", err, stdout.String(), stderr.String())
	}
	for _, want := range []string{"no model", "operator", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "AGENTBOX_AGENT=shell"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q, want nothing (no job id)", stdout.String())
	}

	shell := newServer(t, append(noModelEnv, "AGENTBOX_AGENT=shell")...)
	shell.start()
	id, code := shell.submit("echo no model needed")
	if code != http.StatusCreated {
		t.Fatalf("shell agent submit: %d\n%s", code, shell.logs)
	}
	if j := shell.awaitFinal([]string{id})[id]; j.Status != "complete" {
		t.Errorf("shell job %+v", j)
	}
}
