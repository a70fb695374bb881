// Package gittest runs real git servers for tests: Debian's OpenSSH
// server on a loopback port with generated keys (StartSSH), and git's
// smart HTTP (git http-backend behind net/http/cgi) with basic auth
// (StartHTTP). Both serve plain bare repositories under a directory of
// their own, which Commit fills. Each server is stopped and its files
// removed when its test ends; an sshd a killed test run left behind is
// killed by the next StartSSH.
package gittest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Author is the author of the commits Commit makes.
const Author = "gittest <gittest@localhost>"

// Git runs git in dir (GIT_DIR unset, no config of the host's) and
// returns its output, failing the test if it fails.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = Env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(string(out))
}

// Env is the environment Git runs git with: this process's, without its
// GIT_ variables, reading no system or global config, committing as
// Author.
func Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=gittest", "GIT_AUTHOR_EMAIL=gittest@localhost",
		"GIT_COMMITTER_NAME=gittest", "GIT_COMMITTER_EMAIL=gittest@localhost")
}

// Commit makes a commit on branch of the bare repository bare (created,
// with main as its default branch, if it does not exist), on the
// branch's last commit if it has one, in which files (path → content)
// are written (a nil content removes the file), and returns it.
func Commit(t testing.TB, bare, branch string, files map[string][]byte) string {
	t.Helper()
	if _, err := os.Stat(bare); err != nil {
		Git(t, "/", "init", "--quiet", "--bare", "--initial-branch=main", "--", bare)
	}
	work := t.TempDir()
	Git(t, work, "init", "--quiet", "--initial-branch="+branch)
	if Git(t, bare, "for-each-ref", "refs/heads/"+branch) != "" {
		Git(t, work, "fetch", "--quiet", "--", bare, branch)
		Git(t, work, "reset", "--quiet", "--hard", "FETCH_HEAD")
	}
	for name, content := range files {
		p := filepath.Join(work, name)
		if content == nil {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, work, "add", "--all", "--force") // every file given, ignored or not
	Git(t, work, "commit", "--quiet", "--allow-empty", "-m", "gittest commit")
	Git(t, work, "push", "--quiet", "--", bare, "HEAD:refs/heads/"+branch)
	return Git(t, work, "rev-parse", "HEAD")
}

// Files is a map of paths to contents, as Commit takes them.
func Files(kv ...string) map[string][]byte {
	m := map[string][]byte{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = []byte(kv[i+1])
	}
	return m
}
