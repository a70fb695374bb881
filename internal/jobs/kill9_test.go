package jobs_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/fake"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/testenv"
)

// doomedWorkerEnv names the data dir of the worker TestRecoveryAfterKill9
// runs as a process of its own (this test binary again) and kills.
const doomedWorkerEnv = "AGENTBOX_TEST_DOOMED_WORKER"

// TestRecoveryAfterKill9: a worker killed with -9 mid-job leaves its job
// leased and its sandbox running (not the worker's child, as a container
// is not); the worker started again on the same data dir claims the job
// once the lease ends, reattaches to that very sandbox, and the job
// completes on its second attempt, leaving no sandbox behind.
func TestRecoveryAfterKill9(t *testing.T) {
	lease := func(c *jobs.SchedulerConfig) { c.Lease = time.Second }
	if dir := os.Getenv(doomedWorkerEnv); dir != "" {
		runDoomedWorker(t, dir, lease)
		return
	}
	e := newFakeEnv(t)
	now := time.Now().UTC()
	id := jobs.NewID()
	task := "if [ -e marker ]; then echo second run > done.txt; else touch marker; sleep 300; fi"
	if _, _, err := e.st.CreateJob(bg, store.Job{ID: id, Task: task, Status: store.StatusPending, MaxAttempts: 3,
		Isolation: sandbox.IsolationContainer, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	worker := exec.Command(os.Args[0], "-test.run=^TestRecoveryAfterKill9$")
	worker.Env = append(os.Environ(), doomedWorkerEnv+"="+e.dir, testenv.GuestBinaryEnv+"="+guestBinary)
	worker.Stderr = os.Stderr
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { worker.Process.Kill(); worker.Wait() })
	waitFor(t, func() bool { return e.workspaceHas(id, "marker") })
	first := sandboxOf(t, e, id)
	worker.Process.Signal(syscall.SIGKILL)
	worker.Wait()
	if _, err := e.driver.Recover(bg, first); err != nil {
		t.Fatalf("the killed worker's sandbox did not survive it: %v", err)
	}

	svc, _ := e.start(t, jobs.ShellAgent{}, lease)
	j := await(t, svc, id)
	if j.Status != store.StatusComplete || j.Attempts != 2 {
		t.Errorf("job after its worker was killed: %s after %d attempts: %q", j.Status, j.Attempts, j.Error)
	}
	if b, _ := os.ReadFile(filepath.Join(workspaceDir(e.dir, id), "done.txt")); string(b) != "second run\n" {
		t.Errorf("second attempt's output %q", b)
	}
	if last := sandboxOf(t, e, id); last.ID != first.ID {
		t.Errorf("the second attempt ran in sandbox %s, not the recovered %s", last.ID, first.ID)
	}
	e.assertNoSandboxes(t)
}

// runDoomedWorker is the worker TestRecoveryAfterKill9 kills: a scheduler
// on dir's store and sandboxes, running until killed.
func runDoomedWorker(t *testing.T, dir string, mod func(*jobs.SchedulerConfig)) {
	st, err := sqlite.Open(bg, filepath.Join(dir, "agentbox.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := fake.New(fake.Config{Dir: filepath.Join(dir, "sandboxes"), StandIn: sandbox.IsolationContainer})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{dir: dir, st: st, driver: d}
	e.start(t, jobs.ShellAgent{}, mod)
	select {} // until killed
}

// sandboxOf is the handle of the job's sandbox, as its worker saved it.
func sandboxOf(t *testing.T, e *env, id string) sandbox.Handle {
	t.Helper()
	var h sandbox.Handle
	waitFor(t, func() bool {
		j, err := e.st.GetJob(bg, id)
		return err == nil && json.Unmarshal(j.Sandbox, &h) == nil && h.ID != ""
	})
	return h
}
