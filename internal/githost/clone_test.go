package githost_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/githost"
	"github.com/agentbox/agentbox/internal/githost/gittest"
)

var bg = context.Background()

func newHost(t *testing.T, cfg githost.Config) *githost.Host {
	t.Helper()
	if cfg.KnownHostsFile == "" {
		cfg.KnownHostsFile = filepath.Join(t.TempDir(), "known_hosts")
	}
	h, err := githost.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// clone clones url at ref into fresh dirs and returns the base, the
// workspace and the host's git dir.
func clone(t *testing.T, h *githost.Host, url, ref string) (base, work, gitDir string, err error) {
	t.Helper()
	dir := t.TempDir()
	work, gitDir = filepath.Join(dir, "ws"), filepath.Join(dir, "git", "job.git")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	base, err = h.Clone(bg, githost.CloneRequest{URL: url, Ref: ref, Branch: "agentbox/job", GitDir: gitDir, WorkDir: work})
	return base, work, gitDir, err
}

// checkSandboxCopy checks what the sandbox gets: the files, a .git whose
// HEAD is the branch at base, a clean status, origin the URL without
// credentials, and nothing credential-like in .git/config.
func checkSandboxCopy(t *testing.T, work, base, wantOrigin string, secrets ...string) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(work, "README.md")); err != nil || string(b) != "hello\n" {
		t.Fatalf("README.md = %q, %v", b, err)
	}
	if got := gittest.Git(t, work, "rev-parse", "HEAD"); got != base {
		t.Errorf("HEAD = %s, want %s", got, base)
	}
	if got := gittest.Git(t, work, "symbolic-ref", "--short", "HEAD"); got != "agentbox/job" {
		t.Errorf("branch = %s", got)
	}
	if st := gittest.Git(t, work, "status", "--porcelain"); st != "" {
		t.Errorf("status not clean:\n%s", st)
	}
	if got := gittest.Git(t, work, "config", "remote.origin.url"); got != wantOrigin {
		t.Errorf("origin = %q, want %q", got, wantOrigin)
	}
	conf, _ := os.ReadFile(filepath.Join(work, ".git", "config"))
	for _, bad := range append([]string{"credential", "helper", "extraheader", "hooksPath", "sshCommand"}, secrets...) {
		if strings.Contains(strings.ToLower(string(conf)), strings.ToLower(bad)) {
			t.Errorf(".git/config holds %q:\n%s", bad, conf)
		}
	}
	if _, err := os.Stat(filepath.Join(work, ".git", "objects", "info", "alternates")); err == nil {
		t.Error(".git borrows the host's objects (alternates)")
	}
}

func TestCloneSSHKeyFile(t *testing.T) {
	s := gittest.StartSSH(t)
	c := gittest.Commit(t, s.Path("r.git"), "main", gittest.Files("README.md", "hello\n"))
	for _, strict := range []bool{true, false} {
		cfg := githost.Config{SSHKey: s.KeyFile}
		if strict {
			cfg.SSHKnownHosts = s.KnownHosts
		}
		h := newHost(t, cfg)
		base, work, _, err := clone(t, h, s.URL("r.git"), "main")
		if err != nil {
			t.Fatalf("strict %v: %v", strict, err)
		}
		if base != c {
			t.Fatalf("base %s, want %s", base, c)
		}
		checkSandboxCopy(t, work, base, strings.Replace(s.URL("r.git"), s.User+"@", "", 1), string(s.Key[40:80]))
	}
}

func TestCloneSSHUnknownHostKeyRefused(t *testing.T) {
	s := gittest.StartSSH(t)
	gittest.Commit(t, s.Path("r.git"), "main", gittest.Files("README.md", "hello\n"))
	other := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(other, []byte("[127.0.0.1]:1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHost(t, githost.Config{SSHKey: s.KeyFile, SSHKnownHosts: other})
	if _, _, _, err := clone(t, h, s.URL("r.git"), ""); err == nil || !strings.Contains(err.Error(), "Host key verification failed") {
		t.Fatalf("clone with an unknown host key: %v", err)
	}
}

func TestCloneHTTPToken(t *testing.T) {
	s := gittest.StartHTTP(t, config.Default().Git.TokenUser, "")
	c := gittest.Commit(t, s.Path("r.git"), "main", gittest.Files("README.md", "hello\n"))
	h := newHost(t, githost.Config{Token: s.Password})
	base, work, _, err := clone(t, h, s.URL("r.git"), "")
	if err != nil {
		t.Fatal(err)
	}
	if base != c {
		t.Fatalf("base %s, want %s", base, c)
	}
	checkSandboxCopy(t, work, base, s.URL("r.git"), s.Password)

	// A token kept for other hosts is not sent; nor is a wrong one shown.
	h = newHost(t, githost.Config{Token: s.Password, TokenHosts: []string{"github.com"}})
	if _, _, _, err := clone(t, h, s.URL("r.git"), ""); err == nil {
		t.Fatal("the token went to a host it is not for")
	}
	h = newHost(t, githost.Config{Token: "wrong-token-1234"})
	_, _, _, err = clone(t, h, strings.Replace(s.URL("r.git"), "http://", "http://someone@", 1), "")
	if err == nil || strings.Contains(err.Error(), "wrong-token-1234") || strings.Contains(err.Error(), "someone@") {
		t.Fatalf("clone with a wrong token: %v", err)
	}
}

func TestCloneHTTPHostCredentialHelper(t *testing.T) {
	s := gittest.StartHTTP(t, "alice", "")
	gittest.Commit(t, s.Path("r.git"), "main", gittest.Files("README.md", "hello\n"))
	home := t.TempDir()
	store := filepath.Join(home, "creds")
	if err := os.WriteFile(store, []byte(strings.Replace(s.BaseURL, "http://", "http://alice:"+s.Password+"@", 1)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[credential]\n\thelper = store --file "+store+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	h := newHost(t, githost.Config{})
	base, work, _, err := clone(t, h, s.URL("r.git"), "main")
	if err != nil {
		t.Fatal(err)
	}
	checkSandboxCopy(t, work, base, s.URL("r.git"), s.Password)
}

func TestCloneLocal(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "r.git")
	c := gittest.Commit(t, repo, "main", gittest.Files("README.md", "hello\n"))
	h := newHost(t, githost.Config{AllowLocal: true})
	for _, url := range []string{repo, "file://" + repo} {
		base, work, gitDir, err := clone(t, h, url, "")
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if base != c {
			t.Fatalf("%s: base %s, want %s", url, base, c)
		}
		checkSandboxCopy(t, work, base, url)
		// No object of the source is shared by a hard link.
		assertNoSharedInodes(t, filepath.Join(repo, "objects"), filepath.Join(gitDir, "objects"))
		assertNoSharedInodes(t, filepath.Join(gitDir, "objects"), filepath.Join(work, ".git", "objects"))
	}
}

func TestCloneRefs(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "r.git")
	first := gittest.Commit(t, repo, "main", gittest.Files("README.md", "hello\n"))
	gittest.Git(t, repo, "tag", "v1", first)
	second := gittest.Commit(t, repo, "main", gittest.Files("b.txt", "b\n"))
	feature := gittest.Commit(t, repo, "feature", gittest.Files("README.md", "hello\n", "f.txt", "f\n"))
	h := newHost(t, githost.Config{AllowLocal: true})
	for ref, want := range map[string]string{"": second, "main": second, "feature": feature, "v1": first, first: first, first[:10]: first, "refs/heads/feature": feature} {
		base, work, _, err := clone(t, h, repo, ref)
		if err != nil || base != want {
			t.Errorf("ref %q: base %s, %v; want %s", ref, base, err, want)
			continue
		}
		if st := gittest.Git(t, work, "status", "--porcelain"); st != "" {
			t.Errorf("ref %q: status not clean:\n%s", ref, st)
		}
	}
	if _, _, _, err := clone(t, h, repo, "nope"); err == nil || !strings.Contains(err.Error(), "no such branch, tag or commit") {
		t.Errorf("missing ref: %v", err)
	}
}

func TestCloneRefused(t *testing.T) {
	dataDir := t.TempDir()
	inData := filepath.Join(dataDir, "git", "job_x.git")
	gittest.Commit(t, inData, "main", gittest.Files("README.md", "hello\n"))
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(inData, link); err != nil {
		t.Fatal(err)
	}
	strict := newHost(t, githost.Config{})
	local := newHost(t, githost.Config{AllowLocal: true, Forbidden: []string{dataDir}})
	for _, c := range []struct {
		h   *githost.Host
		url string
	}{
		{local, "ext::sh -c touch% /tmp/pwned"}, {local, "fd::3"}, {local, "-uhttps://x/y"},
		{local, "ssh://-oProxyCommand=touch/x/y"}, {local, "-oProxyCommand=x:y"}, {local, "relative/path"},
		{local, "https://user:secret@example.com/r.git"}, {local, "git://example.com/r.git"}, {local, "ftp://example.com/r"},
		{local, "https://example.com"}, {local, "file://host/r"}, {local, ""}, {local, "https://exa\nmple.com/r"},
		{local, inData}, {local, "file://" + inData}, {local, link}, {local, dataDir + "/../" + filepath.Base(dataDir) + "/git/job_x.git"},
		{strict, "/tmp/r.git"}, {strict, "file:///tmp/r.git"},
	} {
		_, _, _, err := clone(t, c.h, c.url, "")
		if !errors.Is(err, githost.ErrRefused) {
			t.Errorf("%q: %v, want refused", c.url, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: the error shows the password: %v", c.url, err)
		}
	}
	for _, ref := range []string{"-x", "a..b", "a b", "a~1", "x.lock", ".x", "a//b", "a@{1}", "@", "a/", "a\x01"} {
		if err := githost.CheckRef(ref); !errors.Is(err, githost.ErrRefused) {
			t.Errorf("ref %q: %v, want refused", ref, err)
		}
	}
	for _, ref := range []string{"main", "v1.2.3", "feature/x-y", "refs/heads/main", "0123abcd", "agentbox/job_01"} {
		if err := githost.CheckRef(ref); err != nil {
			t.Errorf("ref %q: %v", ref, err)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://u:p@h/r.git":      "https://h/r.git",
		"https://u@h:8/r.git":      "https://h:8/r.git",
		"ssh://git@h/r":            "ssh://h/r",
		"git@github.com:o/r.git":   "github.com:o/r.git",
		"/srv/r.git":               "/srv/r.git",
		"https://h/r@x":            "https://h/r@x",
		"file:///srv/a@b/r.git":    "file:///srv/a@b/r.git",
		"https://h/r.git?x=@y.com": "https://h/r.git?x=@y.com",
	} {
		if got := githost.Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// assertNoSharedInodes fails if a file under a is a hard link of one
// under b.
func assertNoSharedInodes(t *testing.T, a, b string) {
	t.Helper()
	inA := inodes(a)
	for ino, p := range inodes(b) {
		if inA[ino] != "" {
			t.Errorf("%s is a hard link of %s", p, inA[ino])
		}
	}
}

// inodes maps the inode of each regular file under dir to its path.
func inodes(dir string) map[uint64]string {
	m := map[uint64]string{}
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			m[inode(fi)] = p
		}
		return nil
	})
	return m
}

func inode(fi os.FileInfo) uint64 { return fi.Sys().(*syscall.Stat_t).Ino }

// A process in another mount namespace (a sandbox, any container) may
// have the data dir mounted under another path: /proc/PID/root leads
// there, and its link resolves in our namespace, to a path that is not
// the data dir.
func TestCloneRefusesProcPaths(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and unshare(1) to make another mount namespace")
	}
	dataDir, alias := t.TempDir(), t.TempDir()
	inData := filepath.Join(dataDir, "git", "job_x.git")
	gittest.Commit(t, inData, "main", gittest.Files("README.md", "hello\n"))
	cmd := exec.Command(unshare, "-m", "sh", "-c", `mount --bind "$0" "$1" && echo ready && exec sleep 600`, dataDir, alias)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Skipf("unshare: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if l, err := bufio.NewReader(out).ReadString('\n'); err != nil || l != "ready\n" {
		t.Skipf("no bind mount in another namespace: %q %v", l, err)
	}
	h := newHost(t, githost.Config{AllowLocal: true, Forbidden: []string{dataDir}})
	viaProc := fmt.Sprintf("/proc/%d/root%s/git/job_x.git", cmd.Process.Pid, alias)
	for _, url := range []string{viaProc, "file://" + viaProc, "/proc/self/root" + inData, "/dev/fd/../../.." + inData} {
		if _, _, _, err := clone(t, h, url, ""); !errors.Is(err, githost.ErrRefused) {
			t.Errorf("%s: %v, want refused", url, err)
		}
	}
}
