package githost_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/githost"
	"github.com/agentbox/agentbox/internal/githost/gittest"
)

// TestBaseBranch: a pull request goes into the branch the job started
// from, else into the remote's default branch.
func TestBaseBranch(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "r.git")
	gittest.Commit(t, repo, "main", gittest.Files("README.md", "hello\n"))
	gittest.Commit(t, repo, "release/1", gittest.Files("v.txt", "1\n"))
	gittest.Git(t, repo, "tag", "v1", "release/1")
	gittest.Git(t, repo, "symbolic-ref", "HEAD", "refs/heads/release/1") // the remote's default branch
	h := newHost(t, githost.Config{AllowLocal: true})
	for ref, want := range map[string]string{"": "release/1", "main": "main", "refs/heads/main": "main", "v1": "release/1"} {
		_, _, gitDir, err := clone(t, h, repo, ref)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := h.BaseBranch(bg, gitDir, ref); err != nil || got != want {
			t.Errorf("BaseBranch(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
}

// TestCommitDoesNotBuildOnTheRemotesBranch: a job's branch that the
// remote already has starts at the job's base in the host's git dir, so
// the push of the job's commit is refused rather than rewriting the
// remote's branch with a fast-forward.
func TestCommitDoesNotBuildOnTheRemotesBranch(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "r.git")
	base := gittest.Commit(t, repo, "main", gittest.Files("README.md", "hello\n"))
	gittest.Commit(t, repo, "agentbox/job", gittest.Files("theirs.txt", "someone else's\n"))
	h := newHost(t, githost.Config{AllowLocal: true})
	_, work, gitDir, err := clone(t, h, repo, "main")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "mine.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	commit, _, err := h.Commit(bg, gitDir, work, "agentbox/job", "mine")
	if err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, gitDir, "--git-dir="+gitDir, "rev-parse", commit+"^"); got != base {
		t.Errorf("the commit's parent is %s, want the base %s", got, base)
	}
	err = h.Push(bg, gitDir, repo, "agentbox/job")
	if err == nil || !strings.Contains(err.Error(), "rejected") {
		t.Errorf("push over the remote's own branch: %v", err)
	}
}
