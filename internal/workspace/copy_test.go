package workspace_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/workspace"
)

// source makes a tree as a sandbox might leave it: files (one set-uid),
// nested and empty directories, links inside and out, a hard link, a FIFO
// and a socket.
func source(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	w := func(name, body string, mode os.FileMode) {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	w("top.txt", "top", 0o644)
	w("bin/run.sh", "#!/bin/sh\n", 0o755)
	w("bin/suid", "s", 0o4755)
	w("d/e/f.txt", "deep", 0o644)
	must(t, os.Mkdir(filepath.Join(src, "empty"), 0o755))
	must(t, os.Mkdir(filepath.Join(src, "private"), 0o700))
	must(t, os.Symlink("d/e/f.txt", filepath.Join(src, "link")))
	must(t, os.Symlink("/etc", filepath.Join(src, "etc")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(src, "passwd")))
	must(t, os.Symlink("../../outside", filepath.Join(src, "d/up")))
	must(t, os.Link(filepath.Join(src, "top.txt"), filepath.Join(src, "hard")))
	must(t, syscall.Mkfifo(filepath.Join(src, "d/fifo"), 0o644))
	l, err := net.Listen("unix", filepath.Join(src, "sock"))
	must(t, err)
	t.Cleanup(func() { l.Close() })
	must(t, os.Chtimes(filepath.Join(src, "d/e/f.txt"), mtime, mtime))
	return src
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func copyTree(t *testing.T, ctx context.Context, src string, lim workspace.Limits) (string, []string, error) {
	t.Helper()
	root, err := os.OpenRoot(src)
	must(t, err)
	defer root.Close()
	parent := t.TempDir()
	skipped, err := workspace.Copy(ctx, root, filepath.Join(parent, "ws"), lim)
	return parent, skipped, err
}

// TestCopy: a tree is copied exactly, links as links (their targets as
// they are, none followed), without set-uid bits, times kept; FIFOs and
// sockets are skipped and named.
func TestCopy(t *testing.T) {
	src := source(t)
	parent, skipped, err := copyTree(t, t.Context(), src, workspace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(parent, "ws")
	want := map[string]string{
		"top.txt": "f 644 top", "hard": "f 644 top", "bin": "d", "bin/run.sh": "f 755 #!/bin/sh\n", "bin/suid": "f 755 s",
		"d": "d", "d/e": "d", "d/e/f.txt": "f 644 deep", "empty": "d", "private": "d 700",
		"link": "l d/e/f.txt", "etc": "l /etc", "passwd": "l /etc/passwd", "d/up": "l ../../outside",
	}
	got := tree(t, ws)
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %q, want %q", name, got[name], w)
		}
	}
	for name, g := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected %s: %q", name, g)
		}
	}
	slices.Sort(skipped)
	if len(skipped) != 2 || !strings.HasPrefix(skipped[0], "d/fifo: a FIFO") || !strings.HasPrefix(skipped[1], "sock: a socket") {
		t.Errorf("skipped %q, want the FIFO and the socket", skipped)
	}
	if fi, err := os.Stat(filepath.Join(ws, "d/e/f.txt")); err != nil || !fi.ModTime().Equal(mtime) {
		t.Errorf("f.txt modified %v (%v), want %v", fi.ModTime(), err, mtime)
	}
	a, _ := os.Stat(filepath.Join(ws, "hard"))
	b, _ := os.Stat(filepath.Join(src, "top.txt"))
	if os.SameFile(a, b) {
		t.Error("the copy shares a file with its source")
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 1 {
		t.Errorf("beside the copy: %v", ents)
	}
}

// TestCopyLimits: a tree over the bytes or the entries allowed is refused,
// and nothing is left behind.
func TestCopyLimits(t *testing.T) {
	src := t.TempDir()
	for _, name := range []string{"a", "b", "c", "d"} {
		must(t, os.WriteFile(filepath.Join(src, name), []byte(strings.Repeat("x", 60)), 0o644))
	}
	for _, lim := range []workspace.Limits{{MaxEntries: 3}, {MaxBytes: 100}} {
		parent, _, err := copyTree(t, t.Context(), src, lim)
		if !errors.Is(err, workspace.ErrTooLarge) {
			t.Errorf("Copy within %+v = %v, want ErrTooLarge", lim, err)
		}
		assertEmpty(t, parent)
	}
}

// TestCopyCanceled: a canceled copy leaves nothing behind.
func TestCopyCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	parent, _, err := copyTree(t, ctx, source(t), workspace.Limits{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Copy = %v, want context.Canceled", err)
	}
	assertEmpty(t, parent)
}

// TestRemovePartial: what an unpack or a copy cut short by a crash left
// beside the workspaces is removed, and nothing else.
func TestRemovePartial(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, "workspaces")
	for _, d := range []string{".job_a.unpack-123/sub", ".job_b.copy-9", "job_c/.job_d.unpack-1", ".hidden"} {
		must(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	must(t, os.WriteFile(filepath.Join(dir, ".upload-77.zip"), []byte("PK"), 0o600))
	must(t, os.WriteFile(filepath.Join(dir, ".job_a.unpack-123/sub/f"), []byte("x"), 0o600))
	removed, err := workspace.NewLocal(data).RemovePartial(t.Context())
	if err != nil || len(removed) != 3 {
		t.Errorf("RemovePartial = %v, %v; want 3 removed", removed, err)
	}
	var left []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if !slices.Equal(left, []string{".hidden", "job_c"}) {
		t.Errorf("left %v, want .hidden and job_c", left)
	}
}

// TestInPlace: every workspace of an in-place store is the person's
// directory, which the store never removes.
func TestInPlace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main"), 0o644))
	s := workspace.NewInPlace(dir + "/")
	got, err := s.Prepare(t.Context(), "job_a")
	if err != nil || got != dir || s.Dir("job_a") != dir {
		t.Errorf("Prepare = %q, %v; Dir %q; want %q", got, err, s.Dir("job_a"), dir)
	}
	root, err := s.Open(t.Context(), "job_a")
	must(t, err)
	b, err := root.ReadFile("main.go")
	root.Close()
	if string(b) != "package main" || err != nil {
		t.Errorf("main.go through Open = %q, %v", b, err)
	}
	if err := s.Remove(t.Context(), "job_a"); err == nil {
		t.Error("Remove of a person's directory: no error")
	}
	if _, err := os.Stat(filepath.Join(dir, "main.go")); err != nil {
		t.Errorf("after Remove: %v", err)
	}
	if ids, err := s.List(t.Context()); len(ids) != 0 || err != nil {
		t.Errorf("List = %v, %v", ids, err)
	}
}
