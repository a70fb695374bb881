package workspace_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/blobs"
	"github.com/agentbox/agentbox/internal/blobs/dirblobs"
	"github.com/agentbox/agentbox/internal/workspace"
)

// newShared returns a Shared over a dirblobs store in a temporary
// directory, and that directory.
func newShared(t *testing.T) (*workspace.Shared, string) {
	t.Helper()
	dir := t.TempDir()
	b, err := dirblobs.New(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	return workspace.NewShared(b, filepath.Join(dir, "cache")), b.Dir()
}

// save checkpoints dir as the workspace of job id after step.
func save(t *testing.T, s *workspace.Shared, id, dir string, prev *workspace.Snapshot, step int) (*workspace.Snapshot, workspace.SaveStats) {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	snap, st, err := s.Save(t.Context(), id, workspace.TreeWorkspace, root, prev, workspace.Checkpoint{Step: step, At: time.Now()})
	if err != nil {
		t.Fatalf("save: %v", err)
	}
	return snap, st
}

func write(t *testing.T, dir, name, content string, mode fs.FileMode) {
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

// describe lists every entry under dir with its kind, mode, content or
// target, and a file's mtime.
func describe(t *testing.T, dir string) map[string]string {
	t.Helper()
	return walkTree(t, dir, func(p string, fi fs.FileInfo) string {
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			return "link " + target
		case fi.IsDir():
			return fmt.Sprintf("dir %o", fi.Mode().Perm())
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			return fmt.Sprintf("file %o %q %d", fi.Mode().Perm(), b, fi.ModTime().UnixNano())
		}
		return "other " + fi.Mode().String()
	})
}

// walkTree describes every entry under dir, by its path relative to dir,
// as say says from its path and Lstat.
func walkTree(t *testing.T, dir string, say func(p string, fi fs.FileInfo) string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		got[rel] = say(p, fi)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func sameTree(t *testing.T, got, want map[string]string) {
	t.Helper()
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %q, want %q", p, got[p], w)
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: %q, not in the source", p, g)
		}
	}
}

// TestCheckpointRoundTrip saves a tree of nested directories, empty
// files, modes, symlinks in and out (kept as links) and a FIFO (skipped),
// and restores it as it was.
func TestCheckpointRoundTrip(t *testing.T) {
	s, _ := newShared(t)
	src := t.TempDir()
	write(t, src, "a/b/c/deep.txt", "deep\n", 0o644)
	write(t, src, "a/empty", "", 0o600)
	write(t, src, "run.sh", "#!/bin/sh\necho hi\n", 0o755)
	write(t, src, "same1", "twin", 0o644)
	write(t, src, "same2", "twin", 0o644)
	must(t, os.Mkdir(filepath.Join(src, "emptydir"), 0o750))
	must(t, os.Symlink("a/b/c/deep.txt", filepath.Join(src, "in")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(src, "out")))
	must(t, os.Symlink("../../../x", filepath.Join(src, "a/up")))
	must(t, syscall.Mkfifo(filepath.Join(src, "pipe"), 0o644))
	must(t, os.Chmod(filepath.Join(src, "a/b"), 0o711))
	want := describe(t, src)
	delete(want, "pipe")

	_, st := save(t, s, "job1", src, nil, 3)
	if st.Files != 5 || st.Uploaded != 4 || len(st.Skipped) != 1 || !strings.HasPrefix(st.Skipped[0], "pipe: a FIFO") {
		t.Errorf("stats %+v: want 5 files, 4 blobs put (two files alike), the FIFO skipped", st)
	}
	c, err := s.Latest(t.Context(), "job1", workspace.TreeWorkspace)
	if err != nil || c.Step != 3 || c.Files != 5 || c.Bytes != int64(len("deep\n#!/bin/sh\necho hi\ntwintwin")) {
		t.Fatalf("latest: %+v, %v", c, err)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if _, err := s.Restore(t.Context(), "job1", c, dst); err != nil {
		t.Fatal(err)
	}
	sameTree(t, describe(t, dst), want)
	if _, err := s.Restore(t.Context(), "job1", c, dst); !errors.Is(err, workspace.ErrExists) {
		t.Errorf("restore over a directory: %v, want ErrExists", err)
	}
}

// TestCheckpointIncremental changes one file of many between checkpoints:
// one blob is put. A checkpoint of an unchanged tree puts none, and
// neither does one of a restored tree with the Snapshot Restore gave.
func TestCheckpointIncremental(t *testing.T) {
	s, _ := newShared(t)
	src := t.TempDir()
	for i := range 300 {
		write(t, src, fmt.Sprintf("d%d/f%03d.go", i%7, i), fmt.Sprintf("package d\n// %d\n", i), 0o644)
	}
	snap, st := save(t, s, "job1", src, nil, 0)
	if st.Files != 300 || st.Uploaded != 300 {
		t.Fatalf("first: %+v", st)
	}
	write(t, src, "d3/f010.go", "package d\n// changed\n", 0o644)
	snap, st = save(t, s, "job1", src, snap, 1)
	if st.Files != 300 || st.Uploaded != 1 || st.UploadedBytes != int64(len("package d\n// changed\n")) {
		t.Errorf("one file changed: %+v, want 1 upload", st)
	}
	_, st = save(t, s, "job1", src, snap, 2)
	if st.Uploaded != 0 {
		t.Errorf("nothing changed: %+v", st)
	}
	c, err := s.Latest(t.Context(), "job1", workspace.TreeWorkspace)
	must(t, err)
	dst := filepath.Join(t.TempDir(), "ws")
	rsnap, err := s.Restore(t.Context(), "job1", c, dst)
	must(t, err)
	if rsnap.Manifest() != c.Manifest {
		t.Errorf("restored snapshot of %s, want %s", rsnap.Manifest(), c.Manifest)
	}
	write(t, dst, "new.txt", "new", 0o644)
	_, st = save(t, s, "job1", dst, rsnap, 3)
	if st.Uploaded != 1 || st.Files != 301 {
		t.Errorf("restored tree, one file added: %+v", st)
	}
}

// TestCheckpointLinkSwap replaces a file by a symlink to /etc/passwd
// between checkpoints: it is recorded as a symlink and /etc/passwd is
// never read (no blob of its bytes).
func TestCheckpointLinkSwap(t *testing.T) {
	s, blobDir := newShared(t)
	src := t.TempDir()
	write(t, src, "secret", "mine", 0o644)
	snap, _ := save(t, s, "job1", src, nil, 0)
	must(t, os.Remove(filepath.Join(src, "secret")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(src, "secret")))
	_, st := save(t, s, "job1", src, snap, 1)
	if st.Files != 0 || st.Uploaded != 0 {
		t.Errorf("stats %+v: want no file", st)
	}
	c, err := s.Latest(t.Context(), "job1", workspace.TreeWorkspace)
	must(t, err)
	dst := filepath.Join(t.TempDir(), "ws")
	_, err = s.Restore(t.Context(), "job1", c, dst)
	must(t, err)
	if target, err := os.Readlink(filepath.Join(dst, "secret")); err != nil || target != "/etc/passwd" {
		t.Errorf("secret: %q, %v: want the symlink", target, err)
	}
	passwd, err := os.ReadFile("/etc/passwd")
	must(t, err)
	b, err := dirblobs.New(blobDir)
	must(t, err)
	if has, _ := b.Has(t.Context(), "job1", blobs.Digest(passwd)); has {
		t.Error("the store holds /etc/passwd: the link was followed")
	}
}

// TestRestoreTampered restores a checkpoint one of whose blobs was
// overwritten in the store: it fails, leaving nothing.
func TestRestoreTampered(t *testing.T) {
	s, blobDir := newShared(t)
	src := t.TempDir()
	write(t, src, "a.txt", "alpha", 0o644)
	write(t, src, "sub/b.txt", "bravo", 0o644)
	save(t, s, "job1", src, nil, 0)
	d := blobs.Digest([]byte("bravo"))
	must(t, os.WriteFile(filepath.Join(blobDir, "job1", "objects", d[:2], d), []byte("evil!"), 0o600))
	c, err := s.Latest(t.Context(), "job1", workspace.TreeWorkspace)
	must(t, err)
	parent := t.TempDir()
	_, err = s.Restore(t.Context(), "job1", c, filepath.Join(parent, "ws"))
	if !errors.Is(err, blobs.ErrCorrupt) {
		t.Errorf("restore: %v, want ErrCorrupt", err)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// TestMaterialize reuses a materialization while the ref is unchanged,
// also for callers at once, and makes another (removing the old) once it
// changes.
func TestMaterialize(t *testing.T) {
	s, _ := newShared(t)
	src := t.TempDir()
	write(t, src, "a.txt", "one", 0o644)
	snap, _ := save(t, s, "job1", src, nil, 0)
	var wg sync.WaitGroup
	dirs := make([]string, 4)
	for i := range dirs {
		wg.Go(func() {
			var err error
			if dirs[i], _, err = s.Materialize(context.Background(), "job1", workspace.TreeWorkspace); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, d := range dirs[1:] {
		if d != dirs[0] {
			t.Fatalf("materialized in %v", dirs)
		}
	}
	old := dirs[0]
	write(t, src, "a.txt", "two", 0o644)
	save(t, s, "job1", src, snap, 1)
	dir, c, err := s.Materialize(t.Context(), "job1", workspace.TreeWorkspace)
	must(t, err)
	if dir == old || c.Step != 1 {
		t.Errorf("after a change: %s step %d, was %s", dir, c.Step, old)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "two" {
		t.Errorf("a.txt: %q, %v", b, err)
	}
	// A reader may still stream from the old one: it stays a while.
	if _, err := os.Lstat(filepath.Join(old, "a.txt")); err != nil {
		t.Errorf("a fresh old materialization was removed at once: %v", err)
	}
	hour := time.Now().Add(-time.Hour)
	must(t, os.Chtimes(old, hour, hour))
	write(t, src, "a.txt", "three", 0o644)
	save(t, s, "job1", src, nil, 2)
	if _, _, err := s.Materialize(t.Context(), "job1", workspace.TreeWorkspace); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(old); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("old materialization: %v, want it removed once stale", err)
	}
	// The git dir's materialization is another tree's: it never removes
	// the workspace's.
	save(t, s, "job1", src, nil, 2) // same tree, same manifest
	gitSrc := t.TempDir()
	write(t, gitSrc, "HEAD", "ref: refs/heads/main\n", 0o644)
	gr, err := os.OpenRoot(gitSrc)
	must(t, err)
	defer gr.Close()
	if _, _, err := s.Save(t.Context(), "job1", workspace.TreeGit, gr, nil, workspace.Checkpoint{Step: 2}); err != nil {
		t.Fatal(err)
	}
	ws, _, err := s.Materialize(t.Context(), "job1", workspace.TreeWorkspace)
	must(t, err)
	if _, _, err := s.Materialize(t.Context(), "job1", workspace.TreeGit); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "three" {
		t.Errorf("the workspace's materialization after the git dir's: %q, %v", b, err)
	}
}

// TestSharedStore stages a workspace by Unpack through a Shared: it is
// the checkpoint at step 0, Open reads its files, and Remove removes it.
func TestSharedStore(t *testing.T) {
	s, _ := newShared(t)
	ctx := t.Context()
	if _, err := s.Latest(ctx, "job1", workspace.TreeWorkspace); !errors.Is(err, workspace.ErrNotFound) || !errors.Is(err, blobs.ErrNotFound) {
		t.Errorf("latest of none: %v", err)
	}
	arch := tarGz(t, file("README.md", "hello"), file("src/main.go", "package main"))
	must(t, s.Unpack(ctx, "job1", bytes.NewReader(arch), workspace.FormatTarGz, workspace.Limits{}))
	if err := s.Unpack(ctx, "job1", bytes.NewReader(arch), workspace.FormatTarGz, workspace.Limits{}); !errors.Is(err, workspace.ErrExists) {
		t.Errorf("second unpack: %v, want ErrExists", err)
	}
	c, err := s.Latest(ctx, "job1", workspace.TreeWorkspace)
	if err != nil || c.Step != 0 || c.Files != 2 {
		t.Fatalf("latest: %+v, %v", c, err)
	}
	root, err := s.Open(ctx, "job1")
	must(t, err)
	b, err := root.ReadFile("src/main.go")
	root.Close()
	if string(b) != "package main" {
		t.Errorf("src/main.go: %q, %v", b, err)
	}
	ids, err := s.List(ctx)
	if ok, _ := s.Exists(ctx, "job1"); err != nil || len(ids) != 1 || ids[0] != "job1" || !ok {
		t.Errorf("list %v, %v; exists %v", ids, err, ok)
	}
	must(t, s.Remove(ctx, "job1"))
	if ok, err := s.Exists(ctx, "job1"); ok || err != nil {
		t.Errorf("exists after remove: %v, %v", ok, err)
	}
	if _, err := s.Open(ctx, "job1"); !errors.Is(err, workspace.ErrNotFound) {
		t.Errorf("open after remove: %v", err)
	}
}
