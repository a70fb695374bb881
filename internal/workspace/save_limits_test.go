package workspace_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/workspace"
)

// TestCheckpointSparseFile: a sandbox's `truncate -s 1T big` costs it no
// disk; the checkpoint skips the file, saying why, instead of reading and
// putting a terabyte of zeros. A file of few holes is kept.
func TestCheckpointSparseFile(t *testing.T) {
	s, _ := newShared(t)
	src := t.TempDir()
	write(t, src, "a.txt", "alpha", 0o644)
	must(t, os.Truncate(filepath.Join(src, "a.txt"), 1<<20)) // 1 MiB, mostly a hole: kept
	big, err := os.Create(filepath.Join(src, "big"))
	must(t, err)
	must(t, big.Truncate(1<<40))
	must(t, big.Close())
	begin := time.Now()
	snap, st := save(t, s, "job1", src, nil, 1)
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("the checkpoint took %v", took)
	}
	if st.Files != 1 || len(st.Skipped) != 1 || !strings.HasPrefix(st.Skipped[0], "big: a sparse file") {
		t.Errorf("stats %+v: want a.txt saved, big skipped as sparse", st)
	}
	// Made sparse after a checkpoint saw it small: skipped too.
	must(t, os.Truncate(filepath.Join(src, "a.txt"), 1<<40))
	_, st = save(t, s, "job1", src, snap, 2)
	if st.Files != 0 || len(st.Skipped) != 2 {
		t.Errorf("stats %+v: want both skipped", st)
	}
}

// TestCheckpointNewBytesBound: a checkpoint that would read more changed
// bytes than its limit fails with ErrTooLarge, the last checkpoint staying
// the latest; files unchanged since the snapshot given do not count.
func TestCheckpointNewBytesBound(t *testing.T) {
	s, _ := newShared(t)
	src := t.TempDir()
	lim := workspace.SaveLimits{MaxNewBytes: 1 << 20}
	write(t, src, "a", strings.Repeat("a", 900<<10), 0o644)
	snap, _ := saveWithin(t, s, src, nil, 1, lim)
	if snap == nil {
		t.Fatal("the first checkpoint, within its limit, failed")
	}
	write(t, src, "b", strings.Repeat("b", 200<<10), 0o644)
	if _, err := saveWithin(t, s, src, snap, 2, lim); err != nil {
		t.Fatalf("200 KiB changed of 1.1 MiB, within 1 MiB: %v", err)
	}
	_, err := saveWithin(t, s, src, nil, 3, lim)
	if !errors.Is(err, workspace.ErrTooLarge) || !strings.Contains(err.Error(), "1MiB of changed files") {
		t.Errorf("1.1 MiB to read, over 1 MiB: %v; want ErrTooLarge", err)
	}
	if c, err := s.Latest(t.Context(), "job1", workspace.TreeWorkspace); err != nil || c.Step != 2 {
		t.Errorf("latest %+v, %v: want step 2's", c, err)
	}
}

// saveWithin checkpoints dir as the workspace of job1 after step within lim.
func saveWithin(t *testing.T, s *workspace.Shared, dir string, prev *workspace.Snapshot, step int, lim workspace.SaveLimits) (*workspace.Snapshot, error) {
	t.Helper()
	root, err := os.OpenRoot(dir)
	must(t, err)
	defer root.Close()
	snap, _, err := s.SaveWithin(t.Context(), "job1", workspace.TreeWorkspace, root, prev, workspace.Checkpoint{Step: step, At: time.Now()}, lim)
	return snap, err
}

// TestCheckpointInvalidNames: names a sandbox makes that are not UTF-8
// (which JSON cannot hold) or hold a newline; the checkpoint still
// restores, and holds the other files.
func TestCheckpointInvalidNames(t *testing.T) {
	s, _ := newShared(t)
	src := t.TempDir()
	write(t, src, "a.txt", "alpha", 0o644)
	write(t, src, "new\nline", "nl", 0o644)
	write(t, src, "bad\xff", "ff", 0o644)
	write(t, src, "bad\xfe", "fe", 0o644)
	write(t, src, "dir\xff/inner", "in", 0o644)
	_, st := save(t, s, "job1", src, nil, 1)
	c, err := s.Latest(t.Context(), "job1", workspace.TreeWorkspace)
	must(t, err)
	dst := filepath.Join(t.TempDir(), "ws")
	if _, err := s.Restore(t.Context(), "job1", c, dst); err != nil {
		t.Fatalf("restore: %v (saved %+v)", err, st)
	}
	for name, want := range map[string]string{"a.txt": "alpha", "new\nline": "nl"} {
		if b, err := os.ReadFile(filepath.Join(dst, name)); err != nil || string(b) != want {
			t.Errorf("%q: %q, %v", name, b, err)
		}
	}
	if len(st.Skipped) != 3 || !strings.Contains(st.Skipped[0], "not UTF-8") {
		t.Errorf("skipped %q: want the three names that are not UTF-8", st.Skipped)
	}
}

// TestCheckpointSkippedBounded: a checkpoint, taken at every step's end,
// names the FIFOs it leaves out; a sandbox's thousands of them, with long
// paths, cost the server a bounded note, not 4 KiB each.
func TestCheckpointSkippedBounded(t *testing.T) {
	s, _ := newShared(t)
	src := t.TempDir()
	dir := filepath.Join(src, strings.Repeat("d", 250), strings.Repeat("e", 250))
	must(t, os.MkdirAll(dir, 0o755))
	for i := range 1000 {
		must(t, syscall.Mkfifo(filepath.Join(dir, strings.Repeat("f", 240)+strconv.Itoa(i)), 0o644))
	}
	_, st := save(t, s, "job1", src, nil, 1)
	if len(st.Skipped) > 101 || !strings.HasPrefix(st.Skipped[len(st.Skipped)-1], "900 more entries") {
		t.Errorf("%d notes of what was skipped, the last %q; want 100 and how many more", len(st.Skipped), st.Skipped[len(st.Skipped)-1])
	}
}
