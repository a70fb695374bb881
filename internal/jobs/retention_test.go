package jobs_test

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/workspace"
)

// dataEnv is a service without a scheduler on a real store, with jobs put
// in whatever state a test needs: no Docker.
type dataEnv struct {
	t   *testing.T
	dir string
	st  store.Store
	svc *jobs.Service
	now time.Time
}

func newDataEnv(t *testing.T) *dataEnv {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "agentbox.db"), sqlite.Options{Synchronous: sqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &dataEnv{t: t, dir: dir, st: st, svc: newService(t, jobs.ServiceConfig{Store: st, Workspaces: workspace.NewLocal(dir)}), now: time.Now().UTC()}
}

// reconfigure returns a service over e's store and workspaces with the
// changes fn makes to its configuration.
func (e *dataEnv) reconfigure(t *testing.T, fn func(*jobs.ServiceConfig)) *jobs.Service {
	cfg := jobs.ServiceConfig{Store: e.st, Workspaces: workspace.NewLocal(e.dir)}
	fn(&cfg)
	return newService(t, cfg)
}

// job stores a job in status that ended ago before now (not ended when
// ago is 0), with a workspace holding a file, and returns its ID.
func (e *dataEnv) job(status store.Status, ago time.Duration) string {
	e.t.Helper()
	id := jobs.NewID()
	j := store.Job{ID: id, Task: "t", Status: status, MaxAttempts: 3, CreatedAt: e.now.Add(-ago - time.Hour)}
	if status != store.StatusPending {
		j.StartedAt = j.CreatedAt.Add(time.Minute)
	}
	if ago > 0 {
		j.EndedAt = e.now.Add(-ago)
	}
	if _, _, err := e.st.CreateJob(e.t.Context(), j); err != nil {
		e.t.Fatal(err)
	}
	e.write(filepath.Join(workspaceDir(e.dir, id), "src", "main.py"), "print(1)\n")
	return id
}

func (e *dataEnv) write(path, content string) {
	e.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *dataEnv) get(id string) store.Job {
	e.t.Helper()
	j, err := e.st.GetJob(e.t.Context(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

// deletedEvents returns the reasons of a job's deleted events.
func (e *dataEnv) deletedEvents(id string) []string {
	e.t.Helper()
	evs, err := e.st.Events(e.t.Context(), id, 0, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	var reasons []string
	for _, ev := range evs {
		if ev.Type != event.TypeDeleted {
			continue
		}
		var p struct{ Reason string }
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			e.t.Fatal(err)
		}
		reasons = append(reasons, p.Reason)
	}
	return reasons
}

// workspaceDir is where job id's workspace is under the data dir dataDir.
func workspaceDir(dataDir, id string) string { return workspace.NewLocal(dataDir).Dir(id) }

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func (e *dataEnv) janitor(retention time.Duration) *jobs.Janitor {
	return jobs.NewJanitor(e.svc, jobs.JanitorConfig{Retention: retention, Now: func() time.Time { return e.now }})
}

// TestJanitorSweep: of jobs ended 8 days and 1 hour ago, running and
// pending ones, a 7-day retention removes the first's data only; a link in
// a workspace, or in a workspace's place, is removed, never followed.
func TestJanitorSweep(t *testing.T) {
	e := newDataEnv(t)
	outside := t.TempDir()
	e.write(filepath.Join(outside, "keep.txt"), "not the job's")

	old := e.job(store.StatusComplete, 8*24*time.Hour)
	oldWS := workspaceDir(e.dir, old)
	if err := os.Symlink(outside, filepath.Join(oldWS, "out")); err != nil {
		t.Fatal(err)
	}
	hostileTree(t, oldWS)
	linked := e.job(store.StatusError, 9*24*time.Hour)
	linkedWS := workspaceDir(e.dir, linked)
	if err := os.RemoveAll(linkedWS); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, linkedWS); err != nil { // the workspace's entry is a link out
		t.Fatal(err)
	}
	recent := e.job(store.StatusCanceled, time.Hour)
	running := e.job(store.StatusRunning, 0)
	pending := e.job(store.StatusPending, 0)

	jan := e.janitor(7 * 24 * time.Hour)
	n, err := jan.Sweep(t.Context())
	if err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want 2 jobs", n, err)
	}
	for _, p := range []string{oldWS, linkedWS} {
		if exists(p) {
			t.Errorf("%s survived the sweep", p)
		}
	}
	if b, err := os.ReadFile(filepath.Join(outside, "keep.txt")); err != nil || string(b) != "not the job's" {
		t.Errorf("a link's target was followed: keep.txt = %q, %v", b, err)
	}
	for _, id := range []string{recent, running, pending} {
		if !exists(filepath.Join(workspaceDir(e.dir, id), "src", "main.py")) {
			t.Errorf("job %s (%s) lost its workspace", id, e.get(id).Status)
		}
		if j := e.get(id); !j.DeletedAt.IsZero() {
			t.Errorf("job %s (%s) marked deleted", id, j.Status)
		}
	}
	for _, id := range []string{old, linked} {
		j := e.get(id)
		if j.DeletedAt.IsZero() || !j.Status.Final() {
			t.Errorf("job %s: status %s, deleted at %v; want its record kept, marked deleted", id, j.Status, j.DeletedAt)
		}
		if got := e.deletedEvents(id); !slices.Equal(got, []string{jobs.DeletedByRetention}) {
			t.Errorf("job %s: deleted events %v, want one of reason retention", id, got)
		}
		if _, err := e.svc.Workspace(t.Context(), id); !errors.Is(err, jobs.ErrDeleted) {
			t.Errorf("Workspace(%s) after the sweep: %v, want ErrDeleted", id, err)
		}
	}
	if n, err := jan.Sweep(t.Context()); err != nil || n != 0 || len(e.deletedEvents(old)) != 1 {
		t.Errorf("second Sweep = %d, %v, %d events; want nothing more", n, err, len(e.deletedEvents(old)))
	}
}

// hostileTree adds, when the test runs as root as the server does in
// production, what a sandbox leaves in its workspace: files and read-only
// directories of its own uid.
func hostileTree(t *testing.T, ws string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("not root: the workspace holds no files of another uid")
		return
	}
	ro := filepath.Join(ws, "pkg", "mod")
	if err := os.MkdirAll(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ro, "go.mod"), []byte("module x\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ws, filepath.Join(ws, "pkg"), ro, filepath.Join(ro, "go.mod")} {
		if err := os.Lchown(p, 54321, 54321); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{ro, filepath.Join(ws, "pkg")} {
		if err := os.Chmod(d, 0o555); err != nil {
			t.Fatal(err)
		}
	}
}

// TestJanitorRetentionZero: 0 keeps data for ever.
func TestJanitorRetentionZero(t *testing.T) {
	e := newDataEnv(t)
	id := e.job(store.StatusComplete, 400*24*time.Hour)
	if n, err := e.janitor(0).Sweep(t.Context()); err != nil || n != 0 {
		t.Fatalf("Sweep = %d, %v; want nothing", n, err)
	}
	if !exists(workspaceDir(e.dir, id)) || !e.get(id).DeletedAt.IsZero() {
		t.Errorf("retention 0 removed a job's data")
	}
}

// TestJanitorLeftovers: the first sweep removes what a crash between the
// mark and the removal left; it leaves alone directories of no job.
func TestJanitorLeftovers(t *testing.T) {
	e := newDataEnv(t)
	marked := e.job(store.StatusComplete, time.Minute)
	if _, err := e.st.UpdateJob(t.Context(), marked, func(j *store.Job) error { j.DeletedAt = e.now; return nil }); err != nil {
		t.Fatal(err)
	}
	stranger := workspaceDir(e.dir, "not-a-job")
	e.write(filepath.Join(stranger, "f"), "x")
	live := e.job(store.StatusComplete, time.Minute)
	if _, err := e.janitor(0).Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if exists(workspaceDir(e.dir, marked)) {
		t.Errorf("the workspace of a job marked deleted survived the first sweep")
	}
	if !exists(stranger) || !exists(workspaceDir(e.dir, live)) {
		t.Errorf("the sweep removed a directory of no job, or of a job not deleted")
	}
}

// TestJanitorStartClose: Start sweeps at once; Close stops it.
func TestJanitorStartClose(t *testing.T) {
	e := newDataEnv(t)
	id := e.job(store.StatusComplete, 8*24*time.Hour)
	jan := e.janitor(7 * 24 * time.Hour)
	jan.Start(t.Context())
	deadline := time.Now().Add(10 * time.Second)
	for exists(workspaceDir(e.dir, id)) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	done := make(chan struct{})
	go func() { jan.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	if exists(workspaceDir(e.dir, id)) || e.get(id).DeletedAt.IsZero() {
		t.Errorf("the started janitor did not sweep at once")
	}
}

func TestDiskMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	var asked string
	jobs.RegisterDiskMetrics(reg, "/data", 2<<30, func(dir string) (int64, error) {
		asked = dir
		return 5 << 30, nil
	})
	got := gauges(t, reg)
	if got["agentbox_disk_free_bytes"] != 5<<30 || got["agentbox_disk_min_free_bytes"] != 2<<30 || asked != "/data" {
		t.Errorf("gauges %v (free asked of %q)", got, asked)
	}
	reg = prometheus.NewRegistry()
	jobs.RegisterDiskMetrics(reg, "/gone", 0, func(string) (int64, error) { return 0, os.ErrNotExist })
	if v := gauges(t, reg)["agentbox_disk_free_bytes"]; !math.IsNaN(v) {
		t.Errorf("free space that cannot be read = %v, want NaN", v)
	}
}

func gauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf.GetMetric()[0].GetGauge().GetValue()
	}
	return out
}
