package main

import (
	"archive/zip"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/githost"
	"github.com/agentbox/agentbox/internal/githost/gittest"
	"github.com/agentbox/agentbox/internal/store"
)

func TestSubmitRepoAndDiff(t *testing.T) {
	e := clientEnv(t)
	r := e.Repos()
	repo := filepath.Join(t.TempDir(), "r.git")
	gittest.Commit(t, repo, "main", gittest.Files("README.md", "hello\n"))
	out, _ := mustRun(t, "submit", "--repo", repo, "--ref", "main", "Greet the world")
	id := strings.TrimSpace(out)
	j, err := e.Svc.Get(context.Background(), id)
	if err != nil || j.Repo == nil || j.Repo.URL != repo || j.Repo.Ref != "main" {
		t.Fatalf("submitted %q: %+v %v", id, j.Repo, err)
	}
	base, err := r.Host.Clone(context.Background(), githost.CloneRequest{URL: repo, Ref: "main", Branch: "agentbox/" + id,
		GitDir: r.GitDir(id), WorkDir: e.Workspace(id)})
	if err != nil {
		t.Fatal(err)
	}
	e.SetGit(id, store.Git{BaseCommit: base, Branch: "agentbox/" + id})
	e.Start(id)
	e.WriteFile(id, "README.md", "hello\nworld\n")
	e.Finish(id, store.StatusComplete, "")
	if d, _ := mustRun(t, "diff", id); !strings.Contains(d, "+world") || !strings.Contains(d, "diff --git a/README.md b/README.md") {
		t.Errorf("agentbox diff:\n%s", d)
	}
	if p, _ := mustRun(t, "diff", "--format", "patch", id); !strings.Contains(p, "Subject: [PATCH] Greet the world") {
		t.Errorf("agentbox diff --format patch:\n%s", p)
	}
	for _, args := range [][]string{{"diff", "--format", "html", id}, {"diff", "job_nope"}, {"submit", "--ref", "main", "task"},
		{"submit", "--repo", "ext::sh -c id", "task"}} {
		if _, _, err := runClient(context.Background(), "", args...); err == nil {
			t.Errorf("agentbox %s: no error", strings.Join(args, " "))
		}
	}
}

// TestRunFromRepository: agentbox run --repo clones on the host, the
// task runs git in the sandbox, and the zip holds the diff.
func TestRunFromRepository(t *testing.T) {
	instance := sandboxEnv(t)
	t.Setenv("AGENTBOX_AGENT", "shell")
	repo := filepath.Join(t.TempDir(), "r.git")
	base := gittest.Commit(t, repo, "main", gittest.Files("README.md", "hello\n"))
	gittest.Commit(t, repo, "other", gittest.Files("other.txt", "x\n"))
	_, errOut, err := run(context.Background(), "run", "--repo", repo, "--ref", "main",
		`test -z "$(git status --porcelain)" && git log --format=%H -1 && echo changed >> README.md`)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "[git clone "+repo+" ref main") || !strings.Contains(errOut, base[:12]) {
		t.Errorf("stderr lacks the clone:\n%s", errOut)
	}
	zr, err := zip.OpenReader(artifactsPath(t, errOut))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	rc, err := zr.Open("agentbox.diff")
	if err != nil {
		t.Fatal(err)
	}
	diff, _ := io.ReadAll(rc)
	rc.Close()
	if !strings.Contains(string(diff), "+changed") || strings.Contains(string(diff), "other.txt") {
		t.Errorf("agentbox.diff:\n%s", diff)
	}
	assertNoSandboxes(t, instance)
}
