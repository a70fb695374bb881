package jobs_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/store"
)

// TestV1HandleRecoversItsSandbox upgrades a store written by the release
// before sandbox contract v2: testdata/v1-store.db holds a job running
// under worker w1 whose sandbox handle that release's scheduler saved (v1:
// no "version", the Docker driver's fields at the top level; see
// v1fixture_test.go). This release's scheduler, starting as w1, must take
// the job back and go on in the sandbox the handle names, not a new one.
//
// What is patched, and why: a checked-in file cannot hold a running
// container, and the v1 handle names the container and host directories
// of the machine that wrote it. So the test makes a sandbox as the v1
// release did (the Docker driver over the unix socket: the same container,
// labels and directories; on the job's workspace, owned by w1) and writes
// this machine's values into the saved handle's own fields: id, ref,
// state_dir, workspace_dir, owns_workspace, uid, disk_bytes and
// workspace_owner. The handle keeps its v1 shape; nothing else in the
// store is touched.
//
// Proof that the job went on in that sandbox: its task reads a file the
// test wrote to the sandbox's /tmp (a tmpfs of that container, not the
// workspace), and the sandbox event names that sandbox, recovered.
func TestV1HandleRecoversItsSandbox(t *testing.T) {
	e := newEnvFrom(t, "testdata/v1-store.db")
	page, err := e.st.ListJobs(bg, store.ListOptions{})
	if err != nil || len(page.Jobs) != 1 {
		t.Fatalf("fixture jobs: %+v, %v", page.Jobs, err)
	}
	j := page.Jobs[0]
	if j.Status != store.StatusRunning || j.LeaseOwner != "w1" {
		t.Fatalf("fixture job %s is %s under %q; want running under w1", j.ID, j.Status, j.LeaseOwner)
	}
	sb := v1Sandbox(t, e, j)
	ctx := bg
	if res, err := sb.Guest().Exec(ctx, guest.Shell("echo written before the upgrade > /tmp/v1-marker")); err != nil || res.ExitCode != 0 {
		t.Fatalf("write marker: %+v %v", res, err)
	}
	patched := patchV1Handle(t, j.Sandbox, sb)
	if _, err := e.st.UpdateJob(ctx, j.ID, func(x *store.Job) error { x.Sandbox = patched; return nil }); err != nil {
		t.Fatal(err)
	}

	svc, _ := e.start(t, jobs.ShellAgent{})
	done := await(t, svc, j.ID)
	if done.Status != store.StatusComplete || done.Attempts != 2 {
		t.Fatalf("job %s after %d attempts: %q", done.Status, done.Attempts, done.Error)
	}
	if b, _ := os.ReadFile(filepath.Join(workspaceDir(e.dir, j.ID), "marker.txt")); string(b) != "written before the upgrade\n" {
		t.Errorf("marker.txt = %q: the job did not go on in the sandbox the v1 handle names", b)
	}
	var started []string
	for _, ev := range eventsOf(t, svc, j.ID) {
		var p struct {
			SandboxID string `json:"sandbox_id"`
			Recovered bool   `json:"recovered"`
		}
		if ev.Type == event.TypeSandbox && json.Unmarshal(ev.Payload, &p) == nil {
			started = append(started, p.SandboxID)
			if p.SandboxID != sb.Handle().ID || !p.Recovered {
				t.Errorf("sandbox event %s, want sandbox %s recovered", ev.Payload, sb.Handle().ID)
			}
		}
	}
	if len(started) != 1 {
		t.Errorf("sandboxes of the job: %v, want the one recovered", started)
	}
	var saved sandbox.Handle
	if json.Unmarshal(done.Sandbox, &saved) != nil || saved.Version != sandbox.HandleVersion || saved.ID != sb.Handle().ID {
		t.Errorf("handle saved after the upgrade: %s, want the same sandbox as version %d", done.Sandbox, sandbox.HandleVersion)
	}
	e.assertNoSandboxes(t)
}

// v1Sandbox makes the sandbox the v1 scheduler made for job j: on its
// workspace, owned by w1, its guest on the unix socket.
func v1Sandbox(t *testing.T, e *env, j store.Job) sandbox.Sandbox {
	t.Helper()
	ws := workspaceDir(e.dir, j.ID)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if c := e.driver.Capabilities(); c.Transport != sandbox.TransportUnix {
		t.Fatalf("the v1 release reached guests over the unix socket; this driver over %s", c.Transport)
	}
	sb, err := sandbox.Start(bg, e.driver, sandbox.Spec{Owner: "w1"}, sandbox.Binding{JobID: j.ID, WorkspaceDir: ws, ManagedWorkspace: true, WebBase: jobs.WebBase(j.ID)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.driver.Remove(bg, sb.Handle()) }) // the job's end removes it; this, if the test fails first
	return sb
}

// patchV1Handle writes sb's values into the v1 handle saved, keeping its
// shape: the same top-level keys, omitted where v1 omitted them, and no
// "version" or "state".
func patchV1Handle(t *testing.T, saved []byte, sb sandbox.Sandbox) []byte {
	t.Helper()
	var v1 map[string]any
	if err := json.Unmarshal(saved, &v1); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "state"} {
		if _, ok := v1[k]; ok {
			t.Fatalf("the fixture's handle has %q: it is not a v1 handle: %s", k, saved)
		}
	}
	for _, k := range []string{"id", "driver", "job_id", "owner", "ref", "state_dir", "workspace_dir", "uid", "disk_bytes"} {
		if _, ok := v1[k]; !ok {
			t.Fatalf("the fixture's handle lacks %q: %s", k, saved)
		}
	}
	st, err := docker.StateOf(sb.Handle())
	if err != nil {
		t.Fatal(err)
	}
	set := func(k string, v any, keep bool) {
		if keep {
			v1[k] = v
		} else {
			delete(v1, k) // v1 omitted it when empty
		}
	}
	v1["id"], v1["ref"], v1["state_dir"], v1["workspace_dir"] = sb.Handle().ID, st.Ref, st.StateDir, st.WorkspaceDir
	set("owns_workspace", st.OwnsWorkspace, st.OwnsWorkspace)
	set("uid", st.UID, st.UID != 0)
	set("disk_bytes", st.DiskBytes, st.DiskBytes != 0)
	set("workspace_owner", st.WorkspaceOwner, st.WorkspaceOwner != "")
	b, err := json.Marshal(v1)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
