package githost

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// commitWorkspace makes a host git dir whose base is the empty workspace
// work, runs fill on work, and commits it on branch "b".
func commitWorkspace(t *testing.T, fill func(work string)) (string, error) {
	t.Helper()
	dir := t.TempDir()
	work, gitDir := filepath.Join(dir, "ws"), filepath.Join(dir, "job.git")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := h.Snapshot(ctx, gitDir, work); err != nil {
		t.Fatal(err)
	}
	fill(work)
	commit, _, err := h.Commit(ctx, gitDir, work, "b", "m\n")
	return commit, err
}

// A workspace past the entry bound (millions of tiny files) made a commit
// of part of it, silently: pushed, the rest looked deleted.
func TestCommitRefusesTooManyEntries(t *testing.T) {
	defer func(n int) { maxTreeEntries = n }(maxTreeEntries)
	maxTreeEntries = 5
	_, err := commitWorkspace(t, func(work string) {
		for i := range 8 {
			if err := os.WriteFile(filepath.Join(work, fmt.Sprintf("f%d", i)), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	if err == nil || !strings.Contains(err.Error(), "over the 5 files and links") {
		t.Fatalf("commit of 8 files past a bound of 5: %v, want refused", err)
	}
}

// A path past maxPathBytes was left out of the commit, silently.
func TestCommitRefusesTooLongPaths(t *testing.T) {
	_, err := commitWorkspace(t, func(work string) {
		root, err := os.OpenRoot(work)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		p := strings.Repeat("d", 200)
		for len(p) < maxPathBytes+300 {
			if err := root.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
			p += "/" + strings.Repeat("d", 200)
		}
		if err := root.WriteFile(filepath.Dir(p)+"/deep.txt", []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	if err == nil || !strings.Contains(err.Error(), "a path of 4096 bytes or more") {
		t.Fatalf("commit of a path past %d bytes: %v, want refused", maxPathBytes, err)
	}
}

// TestBoundsBeforeGitRuns: the bounds are on the process before the
// program it runs starts (no window in which git runs unbounded): the
// "git" here prints its own limits and nice value at its first step.
func TestBoundsBeforeGitRuns(t *testing.T) {
	h, err := New(Config{Git: "/bin/cat", Memory: 96 << 20, Timeout: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.git(context.Background(), run{args: []string{"/proc/self/limits", "/proc/self/stat"}})
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{"Max data size             100663296            100663296", "Max cpu time              90                   91"} {
		if !strings.Contains(s, want) {
			t.Errorf("limits lack %q:\n%s", want, s)
		}
	}
	// /proc/self/stat: "pid (comm) state ..."; nice is the 19th field.
	_, rest, _ := strings.Cut(s, ") ")
	if f := strings.Fields(rest); len(f) < 17 || f[16] != "10" {
		t.Errorf("nice value = %v, want 10", f[16:17])
	}
}
