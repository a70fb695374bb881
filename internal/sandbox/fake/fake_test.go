package fake_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/fake"
	"github.com/agentbox/agentbox/internal/sandbox/sandboxtest"
)

// newDriver is a fake driver on a short temporary directory (the guest's
// socket path is limited).
func newDriver(t *testing.T) *fake.Driver {
	t.Helper()
	dir, err := os.MkdirTemp("", "abf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d, err := fake.New(fake.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var bg = context.Background()

func TestConformance(t *testing.T) {
	if sandboxtest.Gaps[fake.Isolation] == nil {
		t.Fatal("sandboxtest.Gaps names no case the fake driver cannot pass")
	}
	sandboxtest.Run(t, newDriver(t))
}

// TestBindPauseAndRecover: a sandbox made unbound serves its job's
// workspace and environment once bound, freezes and thaws, and a second
// driver on the same directory (a restarted creator) recovers it.
func TestBindPauseAndRecover(t *testing.T) {
	d := newDriver(t)
	ws := t.TempDir()
	sb, err := sandbox.Start(bg, d, sandbox.Spec{Owner: "w1"}, sandbox.Binding{JobID: "job_1", WorkspaceDir: ws, Env: map[string]string{"JOBVAR": "set"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy(bg) })
	if res, err := sb.Guest().Exec(bg, guest.Shell("echo $JOBVAR > out.txt")); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "out.txt")); string(b) != "set\n" {
		t.Errorf("bound workspace holds %q, want the job's environment", b)
	}
	if err := sb.(sandbox.Binder).Bind(bg, sandbox.Binding{JobID: "job_2"}); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Errorf("second bind: %v, want ErrInvalidSpec", err)
	}
	p := sb.(sandbox.Pauser)
	if err := p.Pause(bg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel()
	if _, err := sb.Guest().Health(ctx); err == nil {
		t.Errorf("a paused sandbox's guest answered")
	}
	if err := p.Unpause(bg); err != nil {
		t.Fatal(err)
	}
	d2, err := fake.New(fake.Config{Dir: d.Dir()})
	if err != nil {
		t.Fatal(err)
	}
	r, err := d2.Recover(bg, sb.Handle())
	if err != nil {
		t.Fatalf("recover from a second driver: %v", err)
	}
	if h := r.Handle(); h.JobID != "job_1" || h.Owner != "w1" {
		t.Errorf("recovered handle %+v", h)
	}
	if err := r.(sandbox.Exiter).Exited(bg); err != nil {
		t.Errorf("running sandbox says it exited: %v", err)
	}
	if err := r.Destroy(bg); err != nil {
		t.Fatal(err)
	}
	if err := r.(sandbox.Exiter).Exited(bg); err == nil {
		t.Errorf("destroyed sandbox says it runs")
	}
}

// TestSurvivesCreatorKilled: a sandbox outlives the process that made it
// being killed with -9, and another driver recovers it. The creator is
// this test binary again, run with creatorEnv set.
func TestSurvivesCreatorKilled(t *testing.T) {
	if dir := os.Getenv(creatorEnv); dir != "" {
		d, err := fake.New(fake.Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		sb, err := d.Create(bg, sandbox.Spec{Binding: &sandbox.Binding{JobID: "job_orphan"}})
		if err != nil {
			t.Fatal(err)
		}
		json.NewEncoder(os.Stdout).Encode(sb.Handle())
		select {} // until killed
	}
	d := newDriver(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestSurvivesCreatorKilled$")
	cmd.Env = append(os.Environ(), creatorEnv+"="+d.Dir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var h sandbox.Handle
	if err := json.NewDecoder(out).Decode(&h); err != nil {
		cmd.Process.Kill()
		t.Fatalf("creator's handle: %v", err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	sb, err := d.Recover(bg, h)
	if err != nil {
		t.Fatalf("recover after the creator was killed: %v", err)
	}
	t.Cleanup(func() { sb.Destroy(bg) })
	if res, err := sb.Guest().Exec(bg, guest.Shell("echo alive")); err != nil || string(res.Stdout) != "alive\n" {
		t.Errorf("recovered sandbox: %+v %v", res, err)
	}
}

const creatorEnv = "FAKE_TEST_CREATOR_DIR"

// TestGuestEndsWithItsDirectory: a sandbox nobody destroyed ends once its
// directory is removed (with its test's temporary directory).
func TestGuestEndsWithItsDirectory(t *testing.T) {
	d := newDriver(t)
	sb, err := d.Create(bg, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := d.HostPaths(sb.Handle())
	if err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(dirs[0])
	deadline := time.Now().Add(30 * time.Second)
	for sb.(sandbox.Exiter).Exited(bg) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the guest still runs 30s after its directory was removed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
