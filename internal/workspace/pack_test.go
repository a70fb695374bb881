package workspace_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/tarpack"
	"github.com/agentbox/agentbox/internal/workspace"
)

// project makes a person's directory: nested files, an empty directory, a
// link inside, a hard link.
func project(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"main.go": "package main", "pkg/a/a.go": "package a", "bin/run.sh": "#!/bin/sh"} {
		p := filepath.Join(dir, name)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(body), 0o644))
	}
	must(t, os.Chmod(filepath.Join(dir, "bin/run.sh"), 0o755))
	must(t, os.Mkdir(filepath.Join(dir, "empty"), 0o755))
	must(t, os.Symlink("pkg/a/a.go", filepath.Join(dir, "link")))
	must(t, os.Link(filepath.Join(dir, "main.go"), filepath.Join(dir, "hard")))
	must(t, os.Chtimes(filepath.Join(dir, "main.go"), mtime, mtime))
	return dir
}

func pack(t *testing.T, dir string, o tarpack.PackOptions) ([]byte, tarpack.Tree, error) {
	t.Helper()
	root, err := os.OpenRoot(dir)
	must(t, err)
	defer root.Close()
	tree, err := tarpack.Survey(t.Context(), root, o)
	if err != nil {
		return nil, tree, err
	}
	var buf bytes.Buffer
	err = tarpack.Pack(t.Context(), &buf, root, o)
	return buf.Bytes(), tree, err
}

// TestPackRoundTrip: what Pack makes, Unpack makes again exactly; Survey
// counts it; Progress sees every byte of content.
func TestPackRoundTrip(t *testing.T) {
	dir := project(t)
	var progress bytes.Buffer
	data, counted, err := pack(t, dir, tarpack.PackOptions{Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if counted != (tarpack.Tree{Files: 4, Dirs: 4, Links: 1, Bytes: int64(progress.Len())}) || progress.Len() != 12+9+9+12 {
		t.Errorf("tree %+v, progress %d bytes", counted, progress.Len())
	}
	parent, err := unpack(t, data, workspace.FormatTarGz, workspace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	got, want := tree(t, filepath.Join(parent, "ws")), tree(t, dir)
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %q, want %q", name, got[name], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("unpacked %d entries, want %d", len(got), len(want))
	}
	if fi, err := os.Stat(filepath.Join(parent, "ws", "main.go")); err != nil || !fi.ModTime().Equal(mtime) {
		t.Errorf("main.go modified %v, want %v", fi.ModTime(), mtime)
	}
}

// TestPackRefuses: what the server would refuse is an error naming it,
// from Survey already; Exclude leaves it out instead.
func TestPackRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		make func(dir string) error
		says string
	}{
		{"fifo", func(dir string) error { return syscall.Mkfifo(filepath.Join(dir, "pkg/fifo"), 0o644) }, "pkg/fifo is a FIFO"},
		{"absolute link", func(dir string) error { return os.Symlink("/usr/bin/python3", filepath.Join(dir, "pkg/python")) }, "outside the directory"},
		{"link up", func(dir string) error { return os.Symlink("../../..", filepath.Join(dir, "pkg/up")) }, "outside the directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := project(t)
			must(t, tt.make(dir))
			if _, _, err := pack(t, dir, tarpack.PackOptions{}); err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("pack: %v, want an error saying %q", err, tt.says)
			}
			if _, _, err := pack(t, dir, tarpack.PackOptions{Exclude: []string{"pkg/*"}}); err != nil {
				t.Errorf("pack excluding it: %v", err)
			}
		})
	}
	dir := project(t)
	data, counted, err := pack(t, dir, tarpack.PackOptions{Exclude: []string{"a", "*.sh"}})
	if err != nil || counted.Files != 2 {
		t.Fatalf("pack with excludes: %+v, %v", counted, err)
	}
	parent, err := unpack(t, data, workspace.FormatTarGz, workspace.Limits{})
	must(t, err)
	for _, gone := range []string{"pkg/a", "bin/run.sh"} {
		if _, err := os.Lstat(filepath.Join(parent, "ws", gone)); !os.IsNotExist(err) {
			t.Errorf("%s was packed: %v", gone, err)
		}
	}
}
