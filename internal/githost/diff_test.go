package githost_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/githost"
	"github.com/agentbox/agentbox/internal/githost/gittest"
)

func write(t *testing.T, dir, name, content string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func diff(t *testing.T, h *githost.Host, gitDir, work, base string) string {
	t.Helper()
	var b bytes.Buffer
	if err := h.Diff(bg, gitDir, work, base, &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func mustContain(t *testing.T, what, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%s lacks %q:\n%s", what, p, s)
		}
	}
}

func mustNotContain(t *testing.T, what, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if strings.Contains(s, p) {
			t.Errorf("%s holds %q:\n%s", what, p, s)
		}
	}
}

func TestDiffOfRepository(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "r.git")
	gittest.Commit(t, repo, "main", map[string][]byte{
		"README.md": []byte("hello\n"), "gone.txt": []byte("bye\n"), ".gitignore": []byte("build/\n*.log\n"),
		"build/keep.txt": []byte("tracked though ignored\n"), "bin.dat": {0, 1, 2, 3},
	})
	h := newHost(t, githost.Config{AllowLocal: true})
	base, work, gitDir, err := clone(t, h, repo, "")
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(t, h, gitDir, work, base); d != "" {
		t.Fatalf("diff of an untouched clone:\n%s", d)
	}
	write(t, work, "README.md", "hello\nworld\n", 0o644)
	if err := os.Remove(filepath.Join(work, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	write(t, work, "new/untracked.py", "print('new')\n", 0o755)
	write(t, work, "bin.dat", "\x00\x01\x02\x04binary", 0o644)
	write(t, work, "build/keep.txt", "changed\n", 0o644)
	write(t, work, "build/out.o", "ignored\n", 0o644)
	write(t, work, "debug.log", "ignored\n", 0o644)
	if err := os.Symlink("README.md", filepath.Join(work, "link")); err != nil {
		t.Fatal(err)
	}
	d := diff(t, h, gitDir, work, base)
	mustContain(t, "diff", d, "+world", "deleted file mode 100644", "-bye", "new file mode 100755", "+print('new')",
		"Binary files a/bin.dat and b/bin.dat differ", "+changed", "new file mode 120000", "+README.md\n\\ No newline at end of file")
	mustNotContain(t, "diff", d, "out.o", "debug.log", ".git/")
	// The sandbox's own commits and index do not matter: the worktree does.
	gittest.Git(t, work, "add", "-A")
	gittest.Git(t, work, "commit", "-qm", "agent's commit")
	if d2 := diff(t, h, gitDir, work, base); d2 != d {
		t.Errorf("diff after the agent committed differs:\n%s", d2)
	}
}

func TestDiffOfSnapshot(t *testing.T) {
	h := newHost(t, githost.Config{})
	for _, upload := range []bool{false, true} {
		work, gitDir := t.TempDir(), filepath.Join(t.TempDir(), "job.git")
		if upload {
			write(t, work, "src/app.py", "print(1)\n", 0o644)
			write(t, work, "data.bin", "\x00\xff", 0o644)
		}
		base, err := h.Snapshot(bg, gitDir, work)
		if err != nil {
			t.Fatal(err)
		}
		if d := diff(t, h, gitDir, work, base); d != "" {
			t.Fatalf("diff of an untouched workspace:\n%s", d)
		}
		write(t, work, "out.txt", "result\n", 0o644)
		if upload {
			write(t, work, "src/app.py", "print(2)\n", 0o644)
		}
		d := diff(t, h, gitDir, work, base)
		mustContain(t, "diff", d, "+++ b/out.txt", "+result")
		if upload {
			mustContain(t, "diff", d, "-print(1)", "+print(2)")
		}
	}
	// A job that started before bases were recorded: the empty tree.
	work := t.TempDir()
	write(t, work, "a.txt", "a\n", 0o644)
	mustContain(t, "diff", diff(t, h, filepath.Join(t.TempDir(), "legacy.git"), work, ""), "+++ b/a.txt", "+a")
}

func TestFormatPatchApplies(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "r.git")
	gittest.Commit(t, repo, "main", gittest.Files("README.md", "hello\n", "old.txt", "old\n"))
	h := newHost(t, githost.Config{AllowLocal: true, Author: "Robot <robot@example.com>"})
	base, work, gitDir, err := clone(t, h, repo, "")
	if err != nil {
		t.Fatal(err)
	}
	var empty bytes.Buffer
	if err := h.FormatPatch(bg, gitDir, work, base, "nothing", &empty); err != nil || empty.Len() != 0 {
		t.Fatalf("patch of an untouched clone: %q, %v", empty.String(), err)
	}
	write(t, work, "README.md", "hello\nagain\n", 0o644)
	write(t, work, "new.bin", "\x00\x01binary", 0o644)
	write(t, work, "run.sh", "#!/bin/sh\n", 0o755)
	if err := os.Remove(filepath.Join(work, "old.txt")); err != nil {
		t.Fatal(err)
	}
	var patch bytes.Buffer
	if err := h.FormatPatch(bg, gitDir, work, base, "Say hello again\n\nThe agent's summary.", &patch); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "patch", patch.String(), "From: Robot <robot@example.com>", "Subject: [PATCH] Say hello again", "GIT binary patch")
	fresh := t.TempDir()
	gittest.Git(t, fresh, "clone", "--quiet", repo, ".")
	p := filepath.Join(t.TempDir(), "p.mbox")
	if err := os.WriteFile(p, patch.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, fresh, "am", "--quiet", p)
	for _, f := range []string{"README.md", "new.bin", "run.sh"} {
		a, _ := os.ReadFile(filepath.Join(work, f))
		b, _ := os.ReadFile(filepath.Join(fresh, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s after git am = %q, want %q", f, b, a)
		}
	}
	if _, err := os.Stat(filepath.Join(fresh, "old.txt")); err == nil {
		t.Error("old.txt survived git am")
	}
	if fi, err := os.Stat(filepath.Join(fresh, "run.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("run.sh lost its executable bit: %v", err)
	}
}

// TestHostileWorktree plants in a workspace everything that would make a
// careless host run a command, follow a link or hang; the diff must run
// none, follow none and finish.
func TestHostileWorktree(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "r.git")
	gittest.Commit(t, repo, "main", gittest.Files("README.md", "hello\n", "a.txt", "a\n"))
	h := newHost(t, githost.Config{AllowLocal: true})
	base, work, gitDir, err := clone(t, h, repo, "")
	if err != nil {
		t.Fatal(err)
	}
	markers := t.TempDir()
	mark := func(name string) string { return "touch " + filepath.Join(markers, name) }
	// Attributes naming a filter and a diff driver, and the commands
	// they would run if any config defined them.
	write(t, work, ".gitattributes", "* filter=evil diff=evil merge=evil\n*.txt text eol=crlf\n", 0o644)
	planted := "[core]\n\tfsmonitor = " + mark("fsmonitor") + "\n\thooksPath = " + filepath.Join(work, "hooks") +
		"\n\tpager = " + mark("pager") + "\n\tsshCommand = " + mark("ssh") + "\n\tattributesFile = " + filepath.Join(work, "attrs") +
		"\n[diff]\n\texternal = " + mark("external") + "\n[diff \"evil\"]\n\tcommand = " + mark("diffdriver") + "\n\ttextconv = " + mark("textconv") +
		"\n[filter \"evil\"]\n\tclean = " + mark("clean") + "\n\tsmudge = " + mark("smudge") + "\n\tprocess = " + mark("process") +
		"\n[include]\n\tpath = /etc/passwd\n[credential]\n\thelper = !" + mark("credential") + "\n"
	write(t, work, ".git/config", planted, 0o644)
	for _, hook := range []string{"pre-commit", "post-checkout", "post-index-change", "fsmonitor-watchman", "reference-transaction", "pre-auto-gc"} {
		write(t, work, "hooks/"+hook, "#!/bin/sh\n"+mark("hook-"+hook)+"\n", 0o755)
		write(t, work, ".git/hooks/"+hook, "#!/bin/sh\n"+mark("githook-"+hook)+"\n", 0o755)
	}
	// A .git file pointing at another repository of the host, and a
	// nested repository with hooks and config of its own.
	other := filepath.Join(t.TempDir(), "other.git")
	gittest.Commit(t, other, "main", gittest.Files("secret.txt", "host secret\n"))
	write(t, work, "sub/.git", "gitdir: "+other+"\n", 0o644)
	write(t, work, "sub/file.txt", "sub\n", 0o644)
	gittest.Git(t, work, "init", "--quiet", "nested")
	write(t, work, "nested/.git/config", planted, 0o644)
	write(t, work, "nested/n.txt", "nested\n", 0o644)
	// Links out of the workspace, to a file, climbing out, to a directory.
	hostFile := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(hostFile, []byte("HOST-SECRET-CONTENT"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"abs": hostFile, "climb": "../../../../../../../../../.." + hostFile, "dir": filepath.Dir(hostFile), "etc": "/etc"} {
		if err := os.Symlink(target, filepath.Join(work, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(hostFile, filepath.Join(work, ".gitignore")); err != nil {
		t.Fatal(err)
	}
	// A FIFO (also as a .gitignore, which git would block opening), a
	// socket, a file of mode 0, names with a newline and UTF-8.
	for _, fifo := range []string{"fifo", "sub2/.gitignore"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(work, fifo)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(filepath.Join(work, fifo), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(t, work, "sub2/x.txt", "x\n", 0o644)
	l, err := net.Listen("unix", filepath.Join(work, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	write(t, work, "zero", "zero mode\n", 0o000)
	write(t, work, "new\nline.txt", "newline\n", 0o644)
	write(t, work, "héllo wörld ✓.txt", "utf8\n", 0o644)

	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	var d, p bytes.Buffer
	if err := h.Diff(ctx, gitDir, work, base, &d); err != nil {
		t.Fatal(err)
	}
	if err := h.FormatPatch(ctx, gitDir, work, base, "hostile", &p); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.Commit(ctx, gitDir, work, "agentbox/job", "hostile"); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(markers); len(ents) > 0 {
		for _, e := range ents {
			t.Errorf("a planted command ran: %s", e.Name())
		}
	}
	for what, s := range map[string]string{"diff": d.String(), "patch": p.String()} {
		mustNotContain(t, what, s, "HOST-SECRET-CONTENT", "host secret", "root:x:0", "Subproject commit")
		mustContain(t, what, s, "+++ b/abs", "+"+hostFile, "+++ b/climb", "+++ b/dir", "+++ b/etc", "+/etc",
			"+++ b/sub/file.txt", "+++ b/nested/n.txt", `"b/new\nline.txt"`, "utf8", "+++ b/sub2/x.txt")
		if os.Geteuid() == 0 { // the server runs as root; others cannot read a file of mode 0
			mustContain(t, what, s, "+zero mode")
		}
		mustNotContain(t, what, s, "b/fifo", "b/sock", "b/sub/.git", "nested/.git", "b/.git/")
	}
}

// TestSparseFileIsNotRead: a 9 GiB sparse file costs the sandbox no disk
// and would cost the host a minute of hashing; the diff names it instead.
func TestSparseFileIsNotRead(t *testing.T) {
	h := newHost(t, githost.Config{})
	work, gitDir := t.TempDir(), filepath.Join(t.TempDir(), "job.git")
	base, err := h.Snapshot(bg, gitDir, work)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(work, "big"))
	if err == nil {
		err = f.Truncate(9 << 30)
	}
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	write(t, work, "ok.txt", "ok\n", 0o644)
	begin := time.Now()
	d := diff(t, h, gitDir, work, base)
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("diff took %v: the sparse file was read", took)
	}
	mustContain(t, "diff", d, "+++ b/big", "+agentbox left this file's content out: a sparse file of 9663676416 bytes", "+ok")
	if _, _, err := h.Commit(bg, gitDir, work, "b", "x"); err == nil || !strings.Contains(err.Error(), "big: a sparse file") {
		t.Errorf("commit of a workspace with a sparse file: %v", err)
	}
}

// TestDiffLeavesOutIgnoredAndCaches: a diff leaves out what the
// workspace's .gitignore ignores and the caches tools make, wherever
// they are; All keeps both.
func TestDiffLeavesOutIgnoredAndCaches(t *testing.T) {
	h := newHost(t, githost.Config{})
	work, gitDir := t.TempDir(), filepath.Join(t.TempDir(), "job.git")
	base, err := h.Snapshot(bg, gitDir, work)
	if err != nil {
		t.Fatal(err)
	}
	write(t, work, ".gitignore", "*.log\n", 0o644)
	write(t, work, "app.py", "print(1)\n", 0o644)
	write(t, work, "run.log", "noise\n", 0o644)
	write(t, work, "__pycache__/app.cpython-312.pyc", "\x00pyc", 0o644)
	write(t, work, "pkg/__pycache__/m.pyc", "\x00pyc", 0o644)
	write(t, work, ".pytest_cache/v/cache/lastfailed", "{}\n", 0o644)
	write(t, work, "web/node_modules/left-pad/index.js", "module.exports = 1\n", 0o644)
	d := diff(t, h, gitDir, work, base)
	mustContain(t, "diff", d, "+++ b/app.py", "+++ b/.gitignore")
	mustNotContain(t, "diff", d, "run.log", "__pycache__", ".pytest_cache", "node_modules")
	var all bytes.Buffer
	if err := h.DiffWith(bg, gitDir, work, base, githost.DiffOptions{All: true}, &all); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "diff with all", all.String(), "+++ b/app.py", "+++ b/run.log", "__pycache__/app.cpython-312.pyc",
		"pkg/__pycache__/m.pyc", ".pytest_cache/v/cache/lastfailed", "web/node_modules/left-pad/index.js")
}
