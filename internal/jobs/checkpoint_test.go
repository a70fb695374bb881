package jobs_test

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/agent"
	"github.com/agentbox/agentbox/internal/blobs"
	"github.com/agentbox/agentbox/internal/blobs/dirblobs"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/githost"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/anthropic"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/internal/workspace"
)

// cluster is one job store and one blob directory shared by workers that
// each have a data dir, a sandbox driver and a git of their own, as the
// hosts of a cluster do.
type cluster struct {
	e     *env
	blobs blobs.Store
}

func newCluster(t *testing.T) *cluster {
	e := newEnv(t)
	b, err := dirblobs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{e: e, blobs: b}
}

// host is one worker of a cluster.
type host struct {
	dir    string
	svc    *jobs.Service
	shared *workspace.Shared
	stop   func()
}

// worker starts scheduler id on a data dir of its own, checkpointing to
// the cluster's blobs, with a service whose workspaces are the Shared
// ones, as serve wires them.
func (c *cluster) worker(t *testing.T, id string, a jobs.Agent, mod ...func(*jobs.SchedulerConfig)) *host {
	t.Helper()
	dir := c.e.dir
	d := c.e.driver.(*docker.Driver)
	if id != "w1" {
		dir = shortDir(t)
		var err error
		d, err = docker.New(docker.Config{Image: testenv.Image(), GuestBinary: guestBinary,
			StateDir: filepath.Join(dir, "sandboxes"), Instance: "jobtest-" + filepath.Base(dir)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
	}
	repos := hostRepos(t, dir)
	shared := workspace.NewShared(c.blobs, filepath.Join(dir, "checkpoint-cache"))
	cfg := jobs.SchedulerConfig{WorkerID: id, Concurrency: 2, Workspaces: workspace.NewLocal(dir), Poll: 50 * time.Millisecond,
		Repos: repos, Checkpoints: shared, CheckpointMarks: filepath.Join(dir, "checkpoint-marks"), ReapInterval: 100 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	for _, m := range mod {
		m(&cfg)
	}
	cfg.Store, cfg.Feed, cfg.Driver, cfg.Agent = c.e.st, jobs.NewFeed(c.e.st, nil), d, a
	sched := jobs.NewScheduler(cfg)
	svc := newService(t, jobs.ServiceConfig{Store: c.e.st, Workspaces: shared, Feed: cfg.Feed, Scheduler: sched, Repos: repos})
	return &host{dir: dir, svc: svc, shared: shared, stop: runScheduler(t, sched, cfg.Feed)}
}

// hostRepos is the git of a host whose data dir is dir.
func hostRepos(t *testing.T, dir string) *jobs.Repos {
	t.Helper()
	h, err := githost.New(githost.Config{KnownHostsFile: filepath.Join(dir, "ssh_known_hosts"), Forbidden: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	return &jobs.Repos{Host: h, Dir: filepath.Join(dir, "git")}
}

func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "abj") // short: sandbox socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// modelAgent is the model agent on the scripted model server.
func modelAgent(t *testing.T, script llmtest.Script) (*agent.Agent, *llmtest.Server) {
	t.Helper()
	fake := llmtest.New(t, script)
	m, err := anthropic.New(anthropic.Config{Name: "claude-sonnet-4-5", APIKey: "k", BaseURL: fake.AnthropicURL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return agent.New(agent.Config{Resolve: func(string) (llm.Model, error) { return m, nil }}), fake
}

func bash(cmd string) llmtest.Turn { return llmtest.Call("bash", map[string]any{"command": cmd}) }

var finish = llmtest.Call("finish", map[string]any{"summary": "done"})

// payloads returns the job's events of type T.
func payloads[T event.Payload](t *testing.T, svc *jobs.Service, id string) []T {
	t.Helper()
	evs, err := svc.Events(bg, id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	for _, ev := range evs {
		if p, ok := event.As[T](ev.Type, ev.Payload); ok {
			out = append(out, p)
		}
	}
	return out
}

// TestCheckpointsAtStepBoundaries: a job of three steps that each write a
// file is checkpointed after each, uploading that one file; its last
// checkpoint is its last step's, taken once the sandbox is gone; the
// worker then drops its local copy, and the service serves the job's
// files and diff from the checkpoints.
func TestCheckpointsAtStepBoundaries(t *testing.T) {
	c := newCluster(t)
	a, _ := modelAgent(t, llmtest.Steps(bash("echo one > a.txt"), bash("echo two > b.txt"), bash("echo three > c.txt"), finish))
	w := c.worker(t, "w1", a)
	id := submit(t, w.svc, "write three files", store.Limits{})
	j := await(t, w.svc, id)
	if j.Status != store.StatusComplete {
		t.Fatalf("job %s: %s", j.Status, j.Error)
	}
	byStep := map[int][]event.Checkpoint{}
	git := 0
	for _, p := range payloads[event.Checkpoint](t, w.svc, id) {
		if p.Error != "" {
			t.Errorf("checkpoint failed: %+v", p)
		}
		if p.Tree == workspace.TreeGit {
			git++
			continue
		}
		byStep[p.Step] = append(byStep[p.Step], p)
	}
	for step := 1; step <= 3; step++ {
		if cs := byStep[step]; len(cs) == 0 || cs[0].Uploaded != 1 || cs[0].Files != step {
			t.Errorf("checkpoints of step %d: %+v; want one of %d files uploading 1", step, cs, step)
		}
	}
	if git == 0 {
		t.Error("no checkpoint of the git dir")
	}
	latest, err := w.shared.Latest(bg, id, workspace.TreeWorkspace)
	if err != nil || latest.Step != j.Steps || latest.Files != 3 {
		t.Errorf("latest checkpoint %+v, %v; want step %d, 3 files", latest, err, j.Steps)
	}
	if cs := byStep[3]; len(cs) == 0 || latest.Bytes == 0 || cs[len(cs)-1].Bytes != latest.Bytes {
		t.Errorf("the last checkpoint event says %+v; the checkpoint holds %d bytes", cs, latest.Bytes)
	}
	if _, err := os.Stat(workspaceDir(w.dir, id)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the local workspace of the ended job is still there: %v", err)
	}
	ws, err := w.svc.Workspace(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	root, err := ws.Open(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if b, err := root.ReadFile("c.txt"); err != nil || string(b) != "three\n" {
		t.Errorf("c.txt from the checkpoint: %q, %v", b, err)
	}
	var diff bytes.Buffer
	if err := w.svc.Diff(bg, id, false, &diff); err != nil || !strings.Contains(diff.String(), "+three") {
		t.Errorf("diff from the checkpoints: %v\n%s", err, diff.String())
	}
}

// TestJobResumesOnAnotherWorker: the worker of a job loses it in its third
// step (its lease expires, as a dead worker's does); a second worker, of
// another data dir, resumes it from the checkpoint of step 2: the files of
// steps 1 and 2 are there, step 3's is not, and the model is told so.
func TestJobResumesOnAnotherWorker(t *testing.T) {
	c := newCluster(t)
	a, fake := modelAgent(t, llmtest.Steps(bash("echo one > a.txt"), bash("echo two > b.txt"),
		bash("echo three > c.txt; sleep 600"), bash("ls"), finish))
	w1 := c.worker(t, "w1", a, func(cfg *jobs.SchedulerConfig) { cfg.Lease = 3 * time.Second })
	id := submit(t, w1.svc, "write files", store.Limits{})
	waitFor(t, func() bool {
		saved := false
		for _, p := range payloads[event.Checkpoint](t, w1.svc, id) {
			saved = saved || p.Tree == workspace.TreeWorkspace && p.Step == 2 && p.Error == ""
		}
		for _, p := range payloads[event.ToolCall](t, w1.svc, id) {
			if p.Step == 3 {
				return saved
			}
		}
		return false
	})
	// w1 is lost: its lease is over and no longer its own.
	if _, err := c.e.st.UpdateJob(bg, id, func(x *store.Job) error {
		x.LeaseOwner, x.LeaseUntil = "lost", time.Now().Add(-time.Second)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w1.stop() // its heartbeat finds the lease lost: it stops, writing nothing
	before := len(fake.Requests())

	w2 := c.worker(t, "w2", a)
	j := await(t, w2.svc, id)
	if j.Status != store.StatusComplete || j.Attempts != 2 {
		t.Fatalf("job %s after %d attempts: %s", j.Status, j.Attempts, j.Error)
	}
	var ls string
	for _, r := range payloads[event.ToolResult](t, w2.svc, id) {
		if r.Step == 4 {
			ls = r.Text
		}
	}
	if !strings.Contains(ls, "a.txt") || !strings.Contains(ls, "b.txt") || strings.Contains(ls, "c.txt") {
		t.Errorf("ls on the second worker: %q; want a.txt and b.txt (steps 1, 2), not c.txt (step 3, lost)", ls)
	}
	told := fake.Requests()[before].Messages
	last := told[len(told)-1].PlainText()
	for _, want := range []string{"moved to another worker", "after step 2", "what step 3 changed in files is lost", "processes", "Check the files"} {
		if !strings.Contains(last, want) {
			t.Errorf("the model was not told %q; its last message:\n%s", want, last)
		}
	}
	notices := payloads[event.Notice](t, w2.svc, id)
	if len(notices) == 0 || !strings.Contains(notices[len(notices)-1].Text, "moved to another worker") {
		t.Errorf("notices %+v", notices)
	}
}

// TestStagedUploadReachesItsWorker: an upload staged through an API
// replica's Shared store (a checkpoint at step 0) runs on a worker of
// another data dir, which restores it before the sandbox starts.
func TestStagedUploadReachesItsWorker(t *testing.T) {
	c := newCluster(t)
	apiDir := t.TempDir()
	api := newService(t, jobs.ServiceConfig{Store: c.e.st, Workspaces: workspace.NewShared(c.blobs, filepath.Join(apiDir, "cache")),
		Repos: hostRepos(t, apiDir)})
	st, err := api.Stage(bg, jobs.Upload{R: bytes.NewReader(tarGzOf(t, map[string]string{"hello.txt": "hello from the upload\n"})),
		Format: workspace.FormatTarGz})
	if err != nil {
		t.Fatal(err)
	}
	j, _, err := api.Submit(bg, jobs.SubmitRequest{Task: "grep -q 'from the upload' hello.txt", Staged: st})
	if err != nil {
		t.Fatal(err)
	}
	w := c.worker(t, "w2", jobs.ShellAgent{})
	if got := await(t, w.svc, j.ID); got.Status != store.StatusComplete {
		t.Fatalf("job %s: %s", got.Status, got.Error)
	}
	var diff bytes.Buffer
	if err := api.Diff(bg, j.ID, false, &diff); err != nil || strings.Contains(diff.String(), "hello.txt") {
		t.Errorf("diff on the API replica: %v; the upload is the job's base, not its change:\n%s", err, diff.String())
	}
}
