package sandboxtest

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
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

// testBindLater: a sandbox made unbound runs on a scratch workspace; Bind
// gives it the job's workspace files, environment and web base (the
// desktop's noVNC page connects under it), refuses a second bind, and
// Destroy copies the workspace back to the job's directory.
func testBindLater(t *testing.T, d sandbox.Driver) {
	if !d.Capabilities().Bind {
		t.Skipf("the %s driver binds only at create (Capabilities.Bind false): sandbox.Start gives Create the binding", d.Capabilities().Isolation)
	}
	ctx, cancel := context.WithTimeout(bg, 2*time.Minute)
	defer cancel()
	s, err := d.Create(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatalf("create unbound: %v", err)
	}
	t.Cleanup(func() { _ = s.Destroy(bg) })
	if got := ok(t, s, "ls -A /workspace | wc -l; echo ${BOUND_LATE:-unset}"); got != "0\nunset" {
		t.Fatalf("an unbound sandbox: workspace entries and env %q, want an empty scratch workspace and no job env", got)
	}
	if all, err := d.List(bg); err != nil {
		t.Fatalf("list: %v", err)
	} else {
		for _, l := range all {
			if l.Handle.ID == s.Handle().ID {
				t.Errorf("an unbound sandbox this process holds is listed (%+v): a reaper would take it for an orphan", l.Handle)
			}
		}
	}
	ws := t.TempDir()
	if err := os.WriteFile(ws+"/job.txt", []byte("the job's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := sandbox.Binding{JobID: "conformance-bind-later", WorkspaceDir: ws, ManagedWorkspace: true,
		Env: map[string]string{"BOUND_LATE": "yes"}, WebBase: "/v1/jobs/bindlater"}
	bd, is := s.(sandbox.Binder)
	if !is {
		t.Fatalf("Capabilities say Bind but the sandbox (%T) is no sandbox.Binder", s)
	}
	if err := bd.Bind(ctx, b); err != nil {
		t.Fatalf("bind: %v", err)
	}
	if got := ok(t, s, "cat /workspace/job.txt; echo $BOUND_LATE; echo made > /workspace/made.txt"); got != "the job's\nyes" {
		t.Errorf("after bind: %q, want the job's file and its environment", got)
	}
	if h := s.Handle(); h.JobID != b.JobID {
		t.Errorf("handle's job %q, want %q", h.JobID, b.JobID)
	}
	checkListedJob(t, d, s.Handle().ID, b.JobID)
	if d.Capabilities().Desktop {
		checkWebBase(t, s, b.WebBase)
	}
	if err := bd.Bind(ctx, b); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Errorf("a second bind: %v, want ErrInvalidSpec", err)
	}
	if err := s.Destroy(bg); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if got, err := os.ReadFile(ws + "/made.txt"); err != nil || string(got) != "made\n" {
		t.Errorf("the job's workspace after destroy: made.txt %q, %v; want what the sandbox wrote", got, err)
	}
}

// checkListedJob: List names the job a sandbox was bound to.
func checkListedJob(t *testing.T, d sandbox.Driver, id, job string) {
	t.Helper()
	all, err := d.List(bg)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	for _, l := range all {
		if l.Handle.ID == id {
			if l.Handle.JobID != job {
				t.Errorf("listed with job %q, want %q", l.Handle.JobID, job)
			}
			return
		}
	}
	t.Errorf("sandbox %s not listed", id)
}

// checkWebBase: the desktop's root sends a browser to noVNC's page told to
// connect under the bound web base.
func checkWebBase(t *testing.T, s sandbox.Sandbox, base string) {
	t.Helper()
	hc := &http.Client{Transport: s.Guest().Transport(), CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	resp, err := hc.Get("http://sandbox/proxy/desktop/")
	if err != nil {
		t.Fatalf("desktop root: %v", err)
	}
	resp.Body.Close()
	want := "path=" + strings.TrimPrefix(base, "/") + "/desktop/websockify"
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || !strings.HasSuffix(loc, want) {
		t.Errorf("desktop root: %d to %q, want a redirect ending in %q", resp.StatusCode, loc, want)
	}
}
