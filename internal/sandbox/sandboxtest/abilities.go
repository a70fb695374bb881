package sandboxtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// testPause: a paused sandbox runs nothing (a command sent meanwhile
// finishes only after Unpause), and an unpaused one answers again with its
// processes and files as they were.
func testPause(t *testing.T, d sandbox.Driver) {
	s := create(t, d, sandbox.Spec{})
	p, is := s.(sandbox.Pauser)
	if !d.Capabilities().Pause {
		if is {
			t.Errorf("the driver's sandboxes are Pausers but its Capabilities say Pause false")
		}
		t.Skipf("the %s driver cannot pause (Capabilities.Pause false)", d.Capabilities().Isolation)
	}
	if !is {
		t.Fatalf("Capabilities say Pause but the sandbox (%T) is no sandbox.Pauser", s)
	}
	ok(t, s, "echo kept > kept.txt")
	if err := p.Pause(bg); err != nil {
		t.Fatalf("pause: %v", err)
	}
	ctx, cancel := context.WithTimeout(bg, 500*time.Millisecond)
	_, err := s.Guest().Exec(ctx, guest.ExecRequest{Cmd: []string{"true"}, TimeoutMS: 400})
	cancel()
	if err == nil {
		t.Errorf("a command ran while the sandbox was paused")
	}
	if err := p.Unpause(bg); err != nil {
		t.Fatalf("unpause: %v", err)
	}
	if got := ok(t, s, "cat kept.txt"); got != "kept" {
		t.Errorf("after unpause the file reads %q", got)
	}
}

// testExited: an Exiter says nothing while its sandbox runs, and that the
// sandbox is gone (ErrGone) once its guest was killed.
func testExited(t *testing.T, d sandbox.Driver) {
	s := create(t, d, sandbox.Spec{})
	e, is := s.(sandbox.Exiter)
	if !is {
		t.Skipf("the %s driver's sandboxes cannot say why they ended (no sandbox.Exiter)", d.Capabilities().Isolation)
	}
	if err := e.Exited(bg); err != nil {
		t.Fatalf("a running sandbox: Exited = %v, want nil", err)
	}
	// The command's parent is the guest, the sandbox's main process.
	_, _ = s.Guest().Exec(bg, guest.ExecRequest{Cmd: []string{"/bin/sh", "-c", "kill -9 $PPID; sleep 60"}, TimeoutMS: 10_000})
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	for {
		err := e.Exited(ctx)
		if errors.Is(err, sandbox.ErrGone) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("a killed sandbox: Exited = %v, want ErrGone", err)
		}
	}
}
