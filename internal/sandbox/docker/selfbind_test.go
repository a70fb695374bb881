package docker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/sandbox"
)

// selfBind is a process inside the sandbox asking its own guest to bind it
// (the guest's socket is in /run/agentbox, open to the sandbox's uid), then
// the host's next command's view of the environment.
const selfBind = `curl -s --unix-socket /run/agentbox/guest.sock -X POST -d '{"env":{"PLANTED":"yes"},"web_base":"/jobs/other"}' http://guest/bind`

// TestSandboxCannotBindItself checks that a process in a sandbox bound at
// create (a job's, made by sandbox.Start) cannot rebind its own guest: the
// env it would plant reaches every later command the host runs, and the
// web base the pages the user's browser is shown.
func TestSandboxCannotBindItself(t *testing.T) {
	d := newDriver(t)
	s, err := sandbox.Start(context.Background(), d, sandbox.Spec{}, sandbox.Binding{JobID: "job-self", Env: map[string]string{"A": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Destroy(context.Background()) })
	out := sh(t, s, selfBind)
	if !strings.Contains(string(out.Stdout), "bound already") {
		t.Errorf("the sandbox's own /bind was not refused: %q", out.Stdout)
	}
	if got := sh(t, s, `echo "${PLANTED:-unset}"`); strings.TrimSpace(string(got.Stdout)) != "unset" {
		t.Errorf("a later command sees PLANTED=%q", got.Stdout)
	}
}

// TestLateBoundSandboxCannotRebindItself: a sandbox bound late with no
// environment and no web base is bound on its guest all the same.
func TestLateBoundSandboxCannotRebindItself(t *testing.T) {
	d := newDriver(t)
	if !d.Capabilities().Bind {
		t.Skip("this host gives no loop-disk workspace: the driver cannot bind late")
	}
	s, err := sandbox.BindLate(context.Background(), d, sandbox.Spec{}, sandbox.Binding{JobID: "job-late"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Destroy(context.Background()) })
	if out := sh(t, s, selfBind); !strings.Contains(string(out.Stdout), "bound already") {
		t.Errorf("the sandbox's own /bind was not refused: %q", out.Stdout)
	}
}
