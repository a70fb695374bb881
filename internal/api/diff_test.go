package api_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/githost"
	"github.com/agentbox/agentbox/internal/githost/gittest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

// snapshotJob is an ended job that started from a workspace holding
// start.txt (its base a snapshot of it) and ended with it changed and
// out.txt written.
func snapshotJob(t *testing.T, e *apitest.Env, r *jobs.Repos) string {
	t.Helper()
	id := e.Submit("write out.txt").ID
	e.WriteFile(id, "start.txt", "before\n")
	startFromSnapshot(t, e, r, id)
	e.WriteFile(id, "start.txt", "after\n")
	e.WriteFile(id, "out.txt", "result\n")
	e.Finish(id, store.StatusComplete, "")
	return id
}

// startFromSnapshot records job id's workspace as its base and starts it,
// as a worker's first run does.
func startFromSnapshot(t *testing.T, e *apitest.Env, r *jobs.Repos, id string) {
	t.Helper()
	base, err := r.Host.Snapshot(context.Background(), r.GitDir(id), e.Workspace(id))
	if err != nil {
		t.Fatal(err)
	}
	e.SetGit(id, store.Git{BaseCommit: base})
	e.Start(id)
}

func TestDiffRoute(t *testing.T) {
	e := apitest.New(t, api.Config{})
	r := e.Repos()
	id := snapshotJob(t, e, r)
	resp, b := do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/diff"})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/x-diff; charset=utf-8" {
		t.Fatalf("status %d, type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	for _, want := range []string{"-before", "+after", "+++ b/out.txt", "+result"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("diff lacks %q:\n%s", want, b)
		}
	}
	zip := readZip(t, getOK(t, e, "/v1/jobs/"+id+"/artifacts.zip"))
	if zip[jobs.DiffName] != string(b) {
		t.Errorf("artifacts.zip's %s = %q, want the diff", jobs.DiffName, zip[jobs.DiffName])
	}

	// Nothing changed: an empty 200.
	same := e.Submit("nothing").ID
	e.WriteFile(same, "a.txt", "a\n")
	startFromSnapshot(t, e, r, same)
	e.Finish(same, store.StatusError, "failed")
	if b := getOK(t, e, "/v1/jobs/"+same+"/diff"); len(b) != 0 {
		t.Errorf("diff of an unchanged workspace: %q", b)
	}

	running := e.Submit("running").ID
	e.Start(running)
	deleted := snapshotJob(t, e, r)
	if _, err := e.Svc.Delete(context.Background(), deleted); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path   string
		status int
		code   string
		msg    string
	}{
		{"/v1/jobs/" + running + "/diff", http.StatusConflict, wire.CodeNotEnded, "sandbox"},
		{"/v1/jobs/" + deleted + "/diff", http.StatusGone, wire.CodeDeleted, "removed"},
		{"/v1/jobs/job_nope/diff", http.StatusNotFound, wire.CodeNotFound, ""},
		{"/v1/jobs/" + id + "/diff?format=patch", http.StatusBadRequest, wire.CodeBadRequest, "repository"},
		{"/v1/jobs/" + id + "/diff?format=html", http.StatusBadRequest, wire.CodeBadRequest, "format"},
	} {
		resp, b := do(t, e, req{method: "GET", path: c.path})
		if got := wantError(t, resp, b, c.status, c.code); !strings.Contains(got.Message, c.msg) {
			t.Errorf("%s: message %q lacks %q", c.path, got.Message, c.msg)
		}
	}
}

func TestDiffRouteOfRepositoryJob(t *testing.T) {
	e := apitest.New(t, api.Config{})
	r := e.Repos()
	repo := filepath.Join(t.TempDir(), "r.git")
	gittest.Commit(t, repo, "main", gittest.Files("README.md", "hello\n"))
	j, _, err := e.Svc.Submit(context.Background(), jobs.SubmitRequest{Task: "Add a greeting\nin detail", Repo: &store.Repo{URL: repo}})
	if err != nil {
		t.Fatal(err)
	}
	ws := e.Workspace(j.ID)
	base, err := r.Host.Clone(context.Background(), githost.CloneRequest{URL: repo, Branch: "agentbox/" + j.ID, GitDir: r.GitDir(j.ID), WorkDir: ws})
	if err != nil {
		t.Fatal(err)
	}
	e.SetGit(j.ID, store.Git{BaseCommit: base, Branch: "agentbox/" + j.ID})
	e.Start(j.ID)
	e.WriteFile(j.ID, "README.md", "hello\nworld\n")
	e.Finish(j.ID, store.StatusComplete, "")
	if d := string(getOK(t, e, "/v1/jobs/"+j.ID+"/diff")); !strings.Contains(d, "+world") {
		t.Errorf("diff:\n%s", d)
	}
	resp, b := do(t, e, req{method: "GET", path: "/v1/jobs/" + j.ID + "/diff?format=patch"})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/x-patch; charset=utf-8" {
		t.Fatalf("patch: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	fresh := t.TempDir()
	gittest.Git(t, fresh, "clone", "--quiet", repo, ".")
	p := filepath.Join(t.TempDir(), "p")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, fresh, "am", "--quiet", p)
	if got := gittest.Git(t, fresh, "log", "-1", "--format=%s"); got != "Add a greeting" {
		t.Errorf("subject %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(fresh, "README.md")); string(got) != "hello\nworld\n" {
		t.Errorf("README.md after git am: %q", got)
	}
}

func TestSubmitRefusesBadRepository(t *testing.T) {
	e := apitest.New(t, api.Config{})
	e.Repos()
	for _, body := range []string{
		`{"task":"t","repo":{}}`,
		`{"task":"t","repo":{"url":"ext::sh -c id"}}`,
		`{"task":"t","repo":{"url":"https://u:secret@example.com/r.git"}}`,
		`{"task":"t","repo":{"url":"https://example.com/r.git","ref":"-x"}}`,
		`{"task":"t","repo":{"url":"https://example.com/r.git","branch":"a..b"}}`,
		`{"task":"t","repo":{"url":"` + e.DataDir + `/git/x.git"}}`,
	} {
		resp, b := do(t, e, req{method: "POST", path: "/v1/jobs", body: body})
		if got := wantError(t, resp, b, http.StatusBadRequest, wire.CodeBadRequest); strings.Contains(got.Message, "secret") {
			t.Errorf("%s: message shows the password: %q", body, got.Message)
		}
	}
	sr := submit(t, e, `{"task":"t","repo":{"url":"https://example.com/r.git","ref":"main","branch":"fix/x","push":true,"pull_request":{"title":"x"}}}`)
	if j := getJob(t, e, sr.JobID); j.Repo == nil || j.Repo.URL != "https://example.com/r.git" || j.Repo.Branch != "fix/x" {
		t.Errorf("repo %+v", j.Repo)
	}
}

func getOK(t *testing.T, e *apitest.Env, path string) []byte {
	t.Helper()
	resp, b := do(t, e, req{method: "GET", path: path})
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return b
}

// TestDiffRouteOverItsBound: a diff or patch over AGENTBOX_GIT_MAX_DIFF
// is a 503 unavailable naming the setting, the same when asked again.
func TestDiffRouteOverItsBound(t *testing.T) {
	e := apitest.New(t, api.Config{})
	r := e.Repos()
	r.MaxDiff = 4 << 10
	repo := filepath.Join(t.TempDir(), "r.git")
	gittest.Commit(t, repo, "main", gittest.Files("README.md", "hello\n"))
	j, _, err := e.Svc.Submit(context.Background(), jobs.SubmitRequest{Task: "grow", Repo: &store.Repo{URL: repo}})
	if err != nil {
		t.Fatal(err)
	}
	base, err := r.Host.Clone(context.Background(), githost.CloneRequest{URL: repo, Branch: "agentbox/" + j.ID, GitDir: r.GitDir(j.ID), WorkDir: e.Workspace(j.ID)})
	if err != nil {
		t.Fatal(err)
	}
	e.SetGit(j.ID, store.Git{BaseCommit: base, Branch: "agentbox/" + j.ID})
	e.Start(j.ID)
	e.WriteFile(j.ID, "README.md", strings.Repeat("a line of the sandbox's\n", 1000))
	e.Finish(j.ID, store.StatusComplete, "")
	for _, path := range []string{"/diff", "/diff", "/diff?format=patch", "/diff?format=patch"} {
		resp, b := do(t, e, req{method: "GET", path: "/v1/jobs/" + j.ID + path})
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), `"unavailable"`) ||
			!strings.Contains(string(b), "AGENTBOX_GIT_MAX_DIFF") || !strings.Contains(string(b), "4KiB") {
			t.Errorf("GET %s over the bound: %d %s; want 503 unavailable naming 4KiB and AGENTBOX_GIT_MAX_DIFF", path, resp.StatusCode, b)
		}
	}
}

// TestDiffRouteAll: the diff leaves out what .gitignore ignores and
// __pycache__, ?all=1 keeps them (kept apart from the default diff), and
// all=1 with format=patch is refused.
func TestDiffRouteAll(t *testing.T) {
	e := apitest.New(t, api.Config{})
	r := e.Repos()
	id := e.Submit("x").ID
	startFromSnapshot(t, e, r, id)
	e.WriteFile(id, ".gitignore", "*.log\n")
	e.WriteFile(id, "app.py", "print(1)\n")
	e.WriteFile(id, "debug.log", "noise\n")
	e.WriteFile(id, "__pycache__/app.pyc", "pyc\n")
	e.Finish(id, store.StatusComplete, "")
	for _, pass := range []string{"made", "kept"} {
		_, d := do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/diff"})
		_, all := do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/diff?all=1"})
		if !strings.Contains(string(d), "+++ b/app.py") || strings.Contains(string(d), "debug.log") || strings.Contains(string(d), "__pycache__") {
			t.Errorf("%s: the diff:\n%s", pass, d)
		}
		if !strings.Contains(string(all), "+++ b/debug.log") || !strings.Contains(string(all), "+++ b/__pycache__/app.pyc") {
			t.Errorf("%s: the diff with all=1:\n%s", pass, all)
		}
	}
	resp, b := do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/diff?all=1&format=patch"})
	wantError(t, resp, b, http.StatusBadRequest, wire.CodeBadRequest)
}
