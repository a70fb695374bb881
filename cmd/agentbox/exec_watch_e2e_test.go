package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// freezeGuest stops the sandbox's guest (the process whose argv starts
// "/opt/agentbox/agentbox guest"; matched on argv, not with pgrep -f, which
// would find this script too) and then waits far longer than the test.
const freezeGuest = `for p in /proc/[0-9]*; do
  if [ "$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null | cut -d' ' -f1,2)" = "/opt/agentbox/agentbox guest" ]; then
    guest=${p#/proc/}
  fi
done
[ -n "$guest" ] || { echo "no guest process found" >&2; exit 7; }
echo "freezing guest $guest"
sleep 1 # for the guest to stream that line first
kill -STOP "$guest"
sleep 600`

// TestExecGivesUpOnFrozenGuest: a guest stopped with SIGSTOP never answers
// the command's stream; exec's watchdog notices within seconds, says so,
// exits 1 (not 130: nobody pressed Ctrl-C) and removes the sandbox. Without
// the watchdog exec would wait for --timeout plus a minute.
func TestExecGivesUpOnFrozenGuest(t *testing.T) {
	instance := sandboxEnv(t)
	// Bounded so that a missing watchdog fails the test instead of hanging
	// it: cancelling is Ctrl-C, which removes the sandbox.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	begin := time.Now()
	stdout, stderr, err := run(ctx, "exec", "-q", freezeGuest)
	took := time.Since(begin)
	t.Logf("exec returned after %v: %v\n%s%s", took.Round(time.Millisecond), err, stdout, stderr)
	if ctx.Err() != nil {
		t.Fatalf("exec was still waiting on the frozen guest after %v", took)
	}
	if !strings.HasPrefix(stdout, "freezing guest ") {
		t.Fatalf("the guest was not frozen: %v\n%s%s", err, stdout, stderr)
	}
	var ee exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Errorf("err = %v, want exit 1", err)
	}
	if !strings.Contains(stderr, "agentbox: the sandbox stopped answering (") || !strings.Contains(stderr, "; removing it") {
		t.Errorf("stderr does not say the sandbox stopped answering:\n%s", stderr)
	}
	// About 6 s of failed checks after the freeze, plus the sandbox's start
	// and removal; roomy for a loaded CI machine.
	if took > 45*time.Second {
		t.Errorf("exec took %v to give up on the frozen guest", took)
	}
	assertNoSandboxes(t, instance)
}
