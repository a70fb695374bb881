package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/store"
)

// TestSubmitWorkspaceFlag: --workspace packs a directory as it uploads it,
// says so on stderr, and the job's workspace holds its files; what the
// server would refuse is refused first, unless --exclude leaves it out.
func TestSubmitWorkspaceFlag(t *testing.T) {
	e := clientEnv(t)
	dir := t.TempDir()
	for name, body := range map[string]string{"main.py": "print(1)\n", "pkg/util.py": "X = 1\n"} {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("pkg/util.py", filepath.Join(dir, "util.py")); err != nil {
		t.Fatal(err)
	}
	out, errOut := mustRun(t, "submit", "--workspace", dir, "fix it")
	id := strings.TrimSpace(out)
	ws := e.Workspaces.Dir(id)
	if b, err := os.ReadFile(filepath.Join(ws, "pkg/util.py")); string(b) != "X = 1\n" || err != nil {
		t.Errorf("pkg/util.py = %q, %v", b, err)
	}
	if target, err := os.Readlink(filepath.Join(ws, "util.py")); target != "pkg/util.py" || err != nil {
		t.Errorf("util.py links to %q, %v", target, err)
	}
	if !strings.Contains(errOut, "uploaded "+dir+": 2 files") {
		t.Errorf("stderr lacks the upload's summary:\n%s", errOut)
	}

	if err := syscall.Mkfifo(filepath.Join(dir, "pkg/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	jobs, _ := e.Svc.List(context.Background(), store.ListOptions{})
	_, _, err := runClient(context.Background(), "", "submit", "--workspace", dir, "fix it")
	if err == nil || !strings.Contains(err.Error(), "pkg/fifo is a FIFO") {
		t.Errorf("a FIFO: %v, want it named", err)
	}
	if again, _ := e.Svc.List(context.Background(), store.ListOptions{}); len(again.Jobs) != len(jobs.Jobs) {
		t.Errorf("a job was submitted with a FIFO in its directory")
	}
	out, _ = mustRun(t, "submit", "--workspace", dir, "--exclude", "fifo", "fix it")
	if _, err := os.Stat(filepath.Join(e.Workspaces.Dir(strings.TrimSpace(out)), "main.py")); err != nil {
		t.Errorf("--exclude: %v", err)
	}
}

// TestSubmitWorkspaceFrom: --workspace-from starts from an ended job's
// workspace; it and --workspace together are refused.
func TestSubmitWorkspaceFromFlag(t *testing.T) {
	e := clientEnv(t)
	done := e.Submit("first").ID
	e.Finish(done, store.StatusComplete, "")
	e.WriteFile(done, "notes.md", "from the first job")
	out, _ := mustRun(t, "submit", "--workspace-from", done, "more")
	if b, err := os.ReadFile(filepath.Join(e.Workspaces.Dir(strings.TrimSpace(out)), "notes.md")); string(b) != "from the first job" || err != nil {
		t.Errorf("notes.md = %q, %v", b, err)
	}
	_, _, err := runClient(context.Background(), "", "submit", "--workspace-from", "job_nope", "more")
	if err == nil || !strings.Contains(err.Error(), "job_nope") {
		t.Errorf("an unknown job: %v", err)
	}
	_, _, err = runClient(context.Background(), "", "submit", "--workspace-from", done, "--workspace", t.TempDir(), "more")
	if err == nil || !strings.Contains(err.Error(), "--workspace-from") {
		t.Errorf("both: %v", err)
	}
}
