// Package workspacetest is the conformance suite of workspace.Store: every
// implementation runs Run from its own tests and so keeps the rules of the
// workspace package's contract. The suite writes a workspace's files as a
// sandbox would, into the host directory Prepare returns.
package workspacetest

import (
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/artifact"
	"github.com/agentbox/agentbox/internal/workspace"
)

// Opener returns a new, empty store.
type Opener func(t *testing.T) workspace.Store

// Run runs the suite, each test in its own t.Run on a fresh store.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(*testing.T, workspace.Store)
	}{
		{"PrepareReadList", testPrepareReadList},
		{"Absent", testAbsent},
		{"BadIDs", testBadIDs},
		{"LinksOut", testLinksOut},
		{"Zip", testZip},
		{"RemoveTwice", testRemoveTwice},
		{"Unpack", testUnpack},
		{"Copy", testCopy},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// prepare makes workspace id and writes files into it (name → content;
// "->target" makes a symlink), as a sandbox would.
func prepare(t *testing.T, s workspace.Store, id string, files map[string]string) string {
	t.Helper()
	dir, err := s.Prepare(t.Context(), id)
	if err != nil {
		t.Fatalf("Prepare(%s): %v", id, err)
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// read reads name through a root over workspace id.
func read(t *testing.T, s workspace.Store, id, name string) (string, error) {
	t.Helper()
	root, err := s.Open(t.Context(), id)
	if err != nil {
		t.Fatalf("Open(%s): %v", id, err)
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return string(b), err
}

func testPrepareReadList(t *testing.T, s workspace.Store) {
	ctx := t.Context()
	dir := prepare(t, s, "job_a", map[string]string{"hello.txt": "hello\n", "src/main.py": "print(1)\n"})
	again, err := s.Prepare(ctx, "job_a")
	if err != nil || again != dir {
		t.Errorf("second Prepare = %q, %v; want %q", again, err, dir)
	}
	prepare(t, s, "job_b", nil)
	for name, want := range map[string]string{"hello.txt": "hello\n", "src/main.py": "print(1)\n"} {
		if got, err := read(t, s, "job_a", name); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q (a second Prepare must keep the files)", name, got, err, want)
		}
	}
	if ok, err := s.Exists(ctx, "job_a"); !ok || err != nil {
		t.Errorf("Exists = %v, %v; want true", ok, err)
	}
	ids, err := s.List(ctx)
	slices.Sort(ids)
	if err != nil || !slices.Equal(ids, []string{"job_a", "job_b"}) {
		t.Errorf("List = %v, %v; want job_a and job_b", ids, err)
	}
}

func testAbsent(t *testing.T, s workspace.Store) {
	ctx := t.Context()
	if ids, err := s.List(ctx); len(ids) != 0 || err != nil {
		t.Errorf("List of an empty store = %v, %v", ids, err)
	}
	if ok, err := s.Exists(ctx, "job_nope"); ok || err != nil {
		t.Errorf("Exists = %v, %v; want false", ok, err)
	}
	if _, err := s.Open(ctx, "job_nope"); !errors.Is(err, workspace.ErrNotFound) {
		t.Errorf("Open: %v, want ErrNotFound", err)
	}
	var buf bytes.Buffer
	if _, err := s.Zip(ctx, "job_nope", &buf, artifact.Options{}); !errors.Is(err, workspace.ErrNotFound) || buf.Len() > 0 {
		t.Errorf("Zip: %v, %d bytes written; want ErrNotFound and nothing", err, buf.Len())
	}
	if err := s.Remove(ctx, "job_nope"); err != nil {
		t.Errorf("Remove: %v", err)
	}
}

func testBadIDs(t *testing.T, s workspace.Store) {
	ctx := t.Context()
	for _, id := range []string{"", ".", "..", "a/b", "../job_a", "/etc"} {
		if dir, err := s.Prepare(ctx, id); err == nil {
			t.Errorf("Prepare(%q) = %q, want an error", id, dir)
		}
		if err := s.Remove(ctx, id); err == nil {
			t.Errorf("Remove(%q): no error", id)
		}
		if root, err := s.Open(ctx, id); err == nil {
			root.Close()
			t.Errorf("Open(%q): no error", id)
		}
	}
}

// outside makes a directory beside the workspaces holding secret.txt.
func outside(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("not the job's"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func testLinksOut(t *testing.T, s workspace.Store) {
	out := outside(t)
	prepare(t, s, "job_a", map[string]string{"hello.txt": "hello\n", "inside": "->hello.txt",
		"out": "->" + out, "secret": "->" + filepath.Join(out, "secret.txt"), "up": "->../..", "etc": "->/etc"})
	if got, err := read(t, s, "job_a", "inside"); err != nil || got != "hello\n" {
		t.Errorf("a link inside: %q, %v", got, err)
	}
	for _, name := range []string{"out/secret.txt", "secret", "up/etc/passwd", "etc/passwd", "../secret.txt", "/etc/passwd"} {
		if got, err := read(t, s, "job_a", name); err == nil {
			t.Errorf("%s read through the root: %q", name, got)
		}
	}
}

func testZip(t *testing.T, s workspace.Store) {
	out := outside(t)
	prepare(t, s, "job_a", map[string]string{"hello.txt": "hello\n", "src/main.py": "print(1)\n",
		"inside": "->hello.txt", "secret": "->" + filepath.Join(out, "secret.txt")})
	var buf bytes.Buffer
	rep, err := s.Zip(t.Context(), "job_a", &buf, artifact.Options{})
	if err != nil {
		t.Fatalf("Zip: %v", err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	want := []string{artifact.ManifestName, "hello.txt", "inside", "src/", "src/main.py"}
	if !slices.Equal(names, want) {
		t.Errorf("zip entries %v, want %v", names, want)
	}
	if rep.Len() != 1 || !strings.Contains(rep.String(), "secret") {
		t.Errorf("report %q, want the link out left out", rep.String())
	}
}

func testRemoveTwice(t *testing.T, s workspace.Store) {
	ctx := t.Context()
	out := outside(t)
	prepare(t, s, "job_a", map[string]string{"hello.txt": "hello\n", "out": "->" + out})
	prepare(t, s, "job_b", map[string]string{"keep.txt": "b"})
	for range 2 {
		if err := s.Remove(ctx, "job_a"); err != nil {
			t.Fatalf("Remove: %v", err)
		}
	}
	if ok, err := s.Exists(ctx, "job_a"); ok || err != nil {
		t.Errorf("Exists after Remove = %v, %v", ok, err)
	}
	if _, err := s.Open(ctx, "job_a"); !errors.Is(err, workspace.ErrNotFound) {
		t.Errorf("Open after Remove: %v, want ErrNotFound", err)
	}
	if ids, err := s.List(ctx); !slices.Equal(ids, []string{"job_b"}) || err != nil {
		t.Errorf("List after Remove = %v, %v; want job_b", ids, err)
	}
	if got, err := read(t, s, "job_b", "keep.txt"); got != "b" || err != nil {
		t.Errorf("the other workspace lost its file: %q, %v", got, err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "secret.txt")); err != nil || string(b) != "not the job's" {
		t.Errorf("Remove followed a link out: secret.txt = %q, %v", b, err)
	}
}

// zipOf is a zip of files (name → content), symlinks ("->target") among them.
func zipOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, content := range files {
		fh := &zip.FileHeader{Name: name, Method: zip.Deflate}
		fh.SetMode(0o644)
		if target, ok := strings.CutPrefix(content, "->"); ok {
			fh.SetMode(os.ModeSymlink | 0o777)
			content = target
		}
		w, err := zw.CreateHeader(fh)
		if err == nil {
			_, err = io.WriteString(w, content)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testUnpack: an archive becomes a workspace a sandbox can be prepared on;
// a workspace that is there is kept; a bad archive leaves no workspace and
// nothing List shows.
func testUnpack(t *testing.T, s workspace.Store) {
	ctx := t.Context()
	good := zipOf(t, map[string]string{"hello.txt": "hello\n", "src/main.py": "print(1)\n", "link": "->hello.txt"})
	if err := s.Unpack(ctx, "job_a", bytes.NewReader(good), workspace.FormatZip, workspace.Limits{}); err != nil {
		t.Fatalf("Unpack: %v", err)
	}
	if _, err := s.Prepare(ctx, "job_a"); err != nil {
		t.Fatalf("Prepare after Unpack: %v", err)
	}
	for name, want := range map[string]string{"hello.txt": "hello\n", "src/main.py": "print(1)\n", "link": "hello\n"} {
		if got, err := read(t, s, "job_a", name); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	other := zipOf(t, map[string]string{"other.txt": "x"})
	if err := s.Unpack(ctx, "job_a", bytes.NewReader(other), workspace.FormatZip, workspace.Limits{}); !errors.Is(err, workspace.ErrExists) {
		t.Errorf("Unpack over a workspace: %v, want ErrExists", err)
	}
	bad := zipOf(t, map[string]string{"ok.txt": "x", "etc": "->/etc"})
	if err := s.Unpack(ctx, "job_b", bytes.NewReader(bad), workspace.FormatZip, workspace.Limits{}); !errors.Is(err, workspace.ErrBadArchive) {
		t.Errorf("Unpack of a link out: %v, want ErrBadArchive", err)
	}
	if ok, err := s.Exists(ctx, "job_b"); ok || err != nil {
		t.Errorf("Exists after a bad Unpack = %v, %v; want false", ok, err)
	}
	if ids, err := s.List(ctx); !slices.Equal(ids, []string{"job_a"}) || err != nil {
		t.Errorf("List = %v, %v; want job_a", ids, err)
	}
	if err := s.Unpack(ctx, "../x", bytes.NewReader(good), workspace.FormatZip, workspace.Limits{}); err == nil {
		t.Error("Unpack took a bad id")
	}
}

// testCopy: a workspace a sandbox wrote is copied into a new one, links as
// links, none followed out; the copy is a workspace of its own; a copy
// onto a workspace that is there, or over the limits, changes nothing.
func testCopy(t *testing.T, s workspace.Store) {
	ctx := t.Context()
	out := outside(t)
	prepare(t, s, "job_a", map[string]string{"hello.txt": "hello\n", "src/main.py": "print(1)\n",
		"inside": "->hello.txt", "secret": "->" + filepath.Join(out, "secret.txt"), "up": "->../.."})
	src, err := s.Open(ctx, "job_a")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := s.Copy(ctx, "job_b", src, workspace.Limits{}); err != nil {
		t.Fatalf("Copy: %v", err)
	}
	for name, want := range map[string]string{"hello.txt": "hello\n", "src/main.py": "print(1)\n", "inside": "hello\n"} {
		if got, err := read(t, s, "job_b", name); err != nil || got != want {
			t.Errorf("copy's %s = %q, %v; want %q", name, got, err, want)
		}
	}
	if got, err := read(t, s, "job_b", "secret"); err == nil {
		t.Errorf("a link out was followed: secret = %q", got)
	}
	dir, err := s.Prepare(ctx, "job_b")
	if err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(dir, "secret")); err != nil || target != filepath.Join(out, "secret.txt") {
		t.Errorf("secret is %q, %v; want the link as it was", target, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := read(t, s, "job_a", "hello.txt"); got != "hello\n" {
		t.Errorf("a change to the copy reached its source: %q", got)
	}
	if _, err := s.Copy(ctx, "job_b", src, workspace.Limits{}); !errors.Is(err, workspace.ErrExists) {
		t.Errorf("Copy onto a workspace: %v, want ErrExists", err)
	}
	if _, err := s.Copy(ctx, "job_c", src, workspace.Limits{MaxBytes: 5}); !errors.Is(err, workspace.ErrTooLarge) {
		t.Errorf("Copy over the limit: %v, want ErrTooLarge", err)
	}
	ids, err := s.List(ctx)
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"job_a", "job_b"}) || err != nil {
		t.Errorf("List = %v, %v; want job_a and job_b", ids, err)
	}
}
