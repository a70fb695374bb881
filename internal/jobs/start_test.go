package jobs_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/workspace"
)

// tarGzOf is a tar.gz of files (name → content).
func tarGzOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	if err := errors.Join(tw.Close(), gz.Close()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// workspaces lists the entries of the data dir's workspaces directory.
func (e *dataEnv) workspaces() []string {
	e.t.Helper()
	ents, err := os.ReadDir(filepath.Join(e.dir, "workspaces"))
	if err != nil && !os.IsNotExist(err) {
		e.t.Fatal(err)
	}
	var names []string
	for _, ent := range ents {
		names = append(names, ent.Name())
	}
	return names
}

func (e *dataEnv) stage(files map[string]string) *jobs.Staged {
	e.t.Helper()
	st, err := e.svc.Stage(e.t.Context(), jobs.Upload{R: bytes.NewReader(tarGzOf(e.t, files)), Format: workspace.FormatTarGz})
	if err != nil {
		e.t.Fatal(err)
	}
	return st
}

// TestSubmitStaged: a job is made on its uploaded workspace; a replay of
// its Idempotency-Key answers it and removes the replay's upload; any
// refusal removes the upload too.
func TestSubmitStaged(t *testing.T) {
	e := newDataEnv(t)
	ctx := t.Context()
	files := map[string]string{"src/app.py": "print('hi')\n"}
	j, created, err := e.svc.Submit(ctx, jobs.SubmitRequest{Task: "t", IdempotencyKey: "k", Staged: e.stage(files)})
	if err != nil || !created {
		t.Fatalf("Submit = %v, %v", created, err)
	}
	if b, err := os.ReadFile(filepath.Join(workspaceDir(e.dir, j.ID), "src/app.py")); string(b) != files["src/app.py"] || err != nil {
		t.Errorf("the job's workspace holds %q, %v", b, err)
	}
	before := e.workspaces()
	again, created, err := e.svc.Submit(ctx, jobs.SubmitRequest{Task: "t", IdempotencyKey: "k", Staged: e.stage(files)})
	if err != nil || created || again.ID != j.ID {
		t.Errorf("replay = %s, created %v, %v; want %s", again.ID, created, err, j.ID)
	}
	refused := map[string]jobs.SubmitRequest{
		"another upload, same key": {Task: "t", IdempotencyKey: "k", Staged: e.stage(map[string]string{"other": "x"})},
		"an invalid task":          {Task: " ", Staged: e.stage(files)},
		"with workspace_from":      {Task: "t", WorkspaceFrom: j.ID, Staged: e.stage(files)},
		"with a repo":              {Task: "t", Repo: &store.Repo{URL: "https://example.com/r.git"}, Staged: e.stage(files)},
	}
	for name, req := range refused {
		if _, _, err := e.svc.Submit(ctx, req); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, _, err := e.svc.Submit(ctx, refused["with a repo"]); !errors.Is(err, jobs.ErrBadStart) {
		t.Errorf("upload and repo: %v, want ErrBadStart", err)
	}
	if after := e.workspaces(); !slices.Equal(after, before) {
		t.Errorf("workspaces %v, want %v: a refused upload was left", after, before)
	}
}

// TestSubmitWorkspaceFrom: a job starts from a copy of an ended job's
// workspace; a job that is unknown, not ended or deleted is refused with
// ErrBadStart naming it, and nothing is made.
func TestSubmitWorkspaceFrom(t *testing.T) {
	e := newDataEnv(t)
	ctx := t.Context()
	done := e.job(store.StatusComplete, time.Minute)
	j, _, err := e.svc.Submit(ctx, jobs.SubmitRequest{Task: "more", WorkspaceFrom: done})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(workspaceDir(e.dir, j.ID), "src/main.py")); string(b) != "print(1)\n" || err != nil {
		t.Errorf("the copy holds %q, %v", b, err)
	}
	if j.WorkspaceFrom != done {
		t.Errorf("WorkspaceFrom = %q", j.WorkspaceFrom)
	}
	running := e.job(store.StatusRunning, 0)
	deleted := e.job(store.StatusComplete, time.Minute)
	if _, err := e.svc.Delete(ctx, deleted); err != nil {
		t.Fatal(err)
	}
	bare := e.job(store.StatusError, time.Minute)
	if err := os.RemoveAll(workspaceDir(e.dir, bare)); err != nil {
		t.Fatal(err)
	}
	before := e.workspaces()
	for _, from := range []string{"job_nope", running, deleted, bare} {
		_, _, err := e.svc.Submit(ctx, jobs.SubmitRequest{Task: "t", WorkspaceFrom: from})
		if !errors.Is(err, jobs.ErrBadStart) || !bytes.Contains([]byte(err.Error()), []byte(from)) {
			t.Errorf("from %s: %v, want ErrBadStart naming it", from, err)
		}
	}
	e.svc = e.reconfigure(t, func(c *jobs.ServiceConfig) { c.MaxUpload = 4 })
	if _, _, err := e.svc.Submit(ctx, jobs.SubmitRequest{Task: "t", WorkspaceFrom: done}); !errors.Is(err, workspace.ErrTooLarge) {
		t.Errorf("over the upload limit: %v, want ErrTooLarge", err)
	}
	if _, _, err := e.svc.Submit(ctx, jobs.SubmitRequest{Task: "t", WorkspaceFrom: done, Repo: &store.Repo{URL: "x"}}); !errors.Is(err, jobs.ErrBadStart) {
		t.Errorf("workspace_from and repo: %v, want ErrBadStart", err)
	}
	if after := e.workspaces(); !slices.Equal(after, before) {
		t.Errorf("workspaces %v, want %v", after, before)
	}
}
