package githost_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/githost"
	"github.com/agentbox/agentbox/internal/githost/gittest"
)

func TestCommitAndPush(t *testing.T) {
	web := gittest.StartHTTP(t, config.Default().Git.TokenUser, "")
	ssh := gittest.StartSSH(t)
	for name, c := range map[string]struct {
		url, bare string
		cfg       githost.Config
	}{
		"http": {web.URL("r.git"), web.Path("r.git"), githost.Config{Token: web.Password}},
		"ssh":  {ssh.URL("r.git"), ssh.Path("r.git"), githost.Config{SSHKey: ssh.KeyFile, SSHKnownHosts: ssh.KnownHosts}},
	} {
		t.Run(name, func(t *testing.T) {
			gittest.Commit(t, c.bare, "main", gittest.Files("README.md", "hello\n"))
			h := newHost(t, c.cfg)
			base, work, gitDir, err := clone(t, h, c.url, "main")
			if err != nil {
				t.Fatal(err)
			}
			write(t, work, "README.md", "hello\nchanged\n", 0o644)
			first, created, err := h.Commit(bg, gitDir, work, "agentbox/job", "First turn")
			if err != nil || !created {
				t.Fatalf("commit: %s %v %v", first, created, err)
			}
			if got := gittest.Git(t, gitDir, "--git-dir="+gitDir, "rev-parse", first+"^"); got != base {
				t.Errorf("parent of the first commit = %s, want the base %s", got, base)
			}
			if again, created, err := h.Commit(bg, gitDir, work, "agentbox/job", "nothing"); err != nil || created || again != first {
				t.Errorf("commit of an unchanged tree: %s %v %v", again, created, err)
			}
			if err := h.Push(bg, gitDir, c.url, "agentbox/job"); err != nil {
				t.Fatal(err)
			}
			write(t, work, "more.txt", "more\n", 0o644)
			second, _, err := h.Commit(bg, gitDir, work, "agentbox/job", "Second turn")
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Push(bg, gitDir, c.url, "agentbox/job"); err != nil {
				t.Fatal(err)
			}
			if got := gittest.Git(t, c.bare, "rev-parse", "refs/heads/agentbox/job"); got != second {
				t.Errorf("server's branch = %s, want %s", got, second)
			}
			if got := gittest.Git(t, c.bare, "rev-parse", second+"^"); got != first {
				t.Errorf("second's parent = %s, want %s", got, first)
			}
			if got := gittest.Git(t, c.bare, "log", "-1", "--format=%an <%ae>%n%s", second); got != config.Default().Git.Author+"\nSecond turn" {
				t.Errorf("commit = %q", got)
			}
		})
	}
}

func TestPushRefusedIsAnError(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "r.git")
	gittest.Commit(t, repo, "main", gittest.Files("README.md", "hello\n"))
	h := newHost(t, githost.Config{AllowLocal: true})
	_, work, gitDir, err := clone(t, h, repo, "")
	if err != nil {
		t.Fatal(err)
	}
	gittest.Commit(t, repo, "agentbox/job", gittest.Files("other.txt", "someone else's\n"))
	if err := os.WriteFile(filepath.Join(work, "x"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.Commit(bg, gitDir, work, "agentbox/job", "mine"); err != nil {
		t.Fatal(err)
	}
	if err := h.Push(bg, gitDir, repo, "agentbox/job"); err == nil {
		t.Fatal("a push that is no fast-forward went through")
	}
}
