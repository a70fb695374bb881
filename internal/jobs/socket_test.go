package jobs_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/store"
)

// reopenedRunDir gives the sandbox its socket's directory back, as it had
// it before its guest listened (the driver takes it back then), and runs
// the task as the shell agent does.
type reopenedRunDir struct{}

func (reopenedRunDir) Run(ctx context.Context, r *jobs.Run) (jobs.Outcome, error) {
	st, err := docker.StateOf(r.Sandbox.Handle())
	if err != nil {
		return jobs.Outcome{}, err
	}
	if err := os.Chmod(filepath.Join(st.StateDir, "run"), 0o777); err != nil {
		return jobs.Outcome{}, err
	}
	return jobs.ShellAgent{}.Run(ctx, r)
}

// A job whose task replaces its guest's socket with a link to a socket on
// the host ends in error, the watchdog saying why, and the host never
// connects to what the link names.
func TestJobThatLinksItsSocketAwayEndsInError(t *testing.T) {
	e := newEnv(t)
	canaryDir, err := os.MkdirTemp("", "abc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(canaryDir) })
	canary, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(canaryDir, "canary.sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer canary.Close()

	// The first check after the link ends the job (tampering counts at
	// once); a second each, not 200 ms, so that a loaded machine's slow
	// health answers (a timeout is one) cannot end it three times before.
	svc, _ := e.start(t, reopenedRunDir{}, func(c *jobs.SchedulerConfig) { c.WatchdogInterval = time.Second })
	sock := docker.GuestStateDir + "/" + guest.SocketName
	task := "rm -f " + sock + " && ln -s " + canary.Addr().String() + " " + sock + " && sleep 600"
	j := await(t, svc, submit(t, svc, task, store.Limits{}))
	if j.Status != store.StatusError || !strings.Contains(j.Error, "sandbox stopped answering") ||
		!strings.Contains(j.Error, guest.SocketName+" is a symbolic link") {
		t.Errorf("job %s: %q, want an error naming the linked socket", j.Status, j.Error)
	}
	canary.SetDeadline(time.Now().Add(100 * time.Millisecond))
	if c, err := canary.Accept(); err == nil {
		c.Close()
		t.Error("the host connected to the canary socket")
	} else if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("canary accept: %v", err)
	}
	e.assertNoSandboxes(t)
}
