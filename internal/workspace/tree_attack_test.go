package workspace_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/blobs"
	"github.com/agentbox/agentbox/internal/workspace"
)

// Attacks on Restore with trees put straight into the store, as one who
// writes the blob store could: each is refused, leaving nothing, or
// restored beneath the new directory alone.

// TestRestoreHostileNames refuses names a tree of Save never holds: a NUL,
// a backslash, a symlink whose target holds a NUL, a file's digest that
// is no digest.
func TestRestoreHostileNames(t *testing.T) {
	s, c, _ := newCounting(t)
	file := putBlob(t, c, []byte("x"))
	for name, e := range map[string]map[string]any{
		"nul":            {"name": "a\x00b", "kind": "file", "digest": file, "size": 1},
		"backslash":      {"name": `..\x`, "kind": "file", "digest": file, "size": 1},
		"target nul":     {"name": "l", "kind": "symlink", "target": "a\x00b"},
		"target empty":   {"name": "l", "kind": "symlink"},
		"digest":         {"name": "a", "kind": "file", "digest": "../../etc/passwd", "size": 1},
		"negative size":  {"name": "a", "kind": "file", "digest": file, "size": -1},
		"sticky dir":     {"name": "a", "kind": "dir", "digest": file, "mode": uint32(os.ModeSticky | 0o777)},
		"long name":      {"name": strings.Repeat("n", 4096), "kind": "file", "digest": file, "size": 1},
		"symlink target": {"name": "l", "kind": "symlink", "target": strings.Repeat("t", 4096)},
	} {
		t.Run(name, func(t *testing.T) { restoreFails(t, s, putTree(t, c, e), nil) })
	}
}

// TestRestoreKindMismatch: a directory whose digest names a file's blob,
// a tree missing from the store and a file whose size is not its blob's
// are refused; a file whose digest names a tree's blob is restored as
// the bytes of that blob, a file like any other.
func TestRestoreKindMismatch(t *testing.T) {
	s, c, _ := newCounting(t)
	file := putBlob(t, c, []byte("x"))
	restoreFails(t, s, putTree(t, c, map[string]any{"name": "d", "kind": "dir", "digest": file}), nil)
	missing := blobs.Digest([]byte("never put"))
	restoreFails(t, s, putTree(t, c, map[string]any{"name": "d", "kind": "dir", "digest": missing}), blobs.ErrNotFound)
	restoreFails(t, s, putTree(t, c, map[string]any{"name": "f", "kind": "file", "digest": missing, "size": 9}), blobs.ErrNotFound)
	restoreFails(t, s, putTree(t, c, map[string]any{"name": "f", "kind": "file", "digest": file, "size": 1 << 40}), blobs.ErrCorrupt)
	restoreFails(t, s, putTree(t, c, map[string]any{"name": "f", "kind": "file", "digest": file, "size": 0}), blobs.ErrCorrupt)
	restoreFails(t, s, missing, blobs.ErrNotFound)

	sub := putTree(t, c, map[string]any{"name": "f", "kind": "file", "digest": file, "size": 1})
	subData, err := json.Marshal(map[string]any{"version": 2, "entries": []map[string]any{{"name": "f", "kind": "file", "digest": file, "size": 1}}})
	must(t, err)
	root := putTree(t, c, map[string]any{"name": "t", "kind": "file", "digest": sub, "size": len(subData), "mode": 0o644})
	dst := filepath.Join(t.TempDir(), "ws")
	_, err = s.Restore(t.Context(), "job1", workspace.Checkpoint{Manifest: root}, dst)
	must(t, err)
	if b, err := os.ReadFile(filepath.Join(dst, "t")); err != nil || string(b) != string(subData) {
		t.Errorf("a file naming a tree's blob: %q, %v", b, err)
	}
}

// TestRestoreModesAndTimes: modes with no bit for the owner, a directory
// no one may enter, times at the ends of int64: restored beneath the
// directory (the owner keeps rwx on directories), or refused cleanly.
func TestRestoreModesAndTimes(t *testing.T) {
	s, c, _ := newCounting(t)
	file := putBlob(t, c, []byte("x"))
	locked := putTree(t, c, map[string]any{"name": "f", "kind": "file", "digest": file, "size": 1, "mode": 0, "mtime": int64(math.MinInt64)})
	root := putTree(t, c,
		map[string]any{"name": "d", "kind": "dir", "digest": locked, "mode": 0, "mtime": int64(math.MaxInt64)},
		map[string]any{"name": "g", "kind": "file", "digest": file, "size": 1, "mode": 0o777, "mtime": int64(math.MaxInt64)},
		map[string]any{"name": "l", "kind": "symlink", "target": "/etc/passwd", "mode": 0o777, "mtime": int64(math.MaxInt64)},
	)
	parent := t.TempDir()
	dst := filepath.Join(parent, "ws")
	snap, err := s.Restore(t.Context(), "job1", workspace.Checkpoint{Manifest: root}, dst)
	if err != nil {
		if ents, _ := os.ReadDir(parent); len(ents) != 0 {
			t.Errorf("a failed restore left %v", ents)
		}
		return
	}
	fi, err := os.Lstat(filepath.Join(dst, "d"))
	must(t, err)
	if fi.Mode().Perm()&0o700 != 0o700 {
		t.Errorf("directory d restored as %v: its owner cannot enter it", fi.Mode())
	}
	if fi, err := os.Lstat(filepath.Join(dst, "l")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("symlink l: %v, %v", fi, err)
	}
	// Saved again as it was restored: the same tree, nothing followed.
	if _, st := save(t, s, "job1", dst, snap, 1); st.Uploaded != 0 {
		t.Errorf("the restored tree saved again put %d files", st.Uploaded)
	}
	must(t, os.RemoveAll(dst))
}

// chain returns the tree of a directory holding n directories each in
// the last ("d/d/…/d"), the deepest holding the file of digest file.
func chain(t *testing.T, c blobs.Store, n int, file string) string {
	t.Helper()
	d := putTree(t, c, map[string]any{"name": "f", "kind": "file", "digest": file, "size": 1, "mode": 0o644})
	for range n {
		d = putTree(t, c, map[string]any{"name": "d", "kind": "dir", "digest": d, "mode": 0o755})
	}
	return d
}

// TestRestoreDeepTree restores a tree as deep as a checkpoint holds, and
// refuses one deeper, leaving nothing. (Every entry is looked up from the
// root, so the cost grows with the square of the depth: a tree as deep as
// a path allows took 20 s.)
func TestRestoreDeepTree(t *testing.T) {
	s, c, _ := newCounting(t)
	file := putBlob(t, c, []byte("x"))
	parent := t.TempDir()
	dst := filepath.Join(parent, "ws")
	const depth = 255 // the file's tree is the 256th
	if _, err := s.Restore(t.Context(), "job1", workspace.Checkpoint{Manifest: chain(t, c, depth, file)}, dst); err != nil {
		t.Fatalf("a tree %d directories deep: %v", depth, err)
	}
	root, err := os.OpenRoot(dst)
	must(t, err)
	defer root.Close()
	if b, err := root.ReadFile(strings.Repeat("d/", depth) + "f"); err != nil || string(b) != "x" {
		t.Errorf("the deepest file: %q, %v", b, err)
	}
	restoreFails(t, s, chain(t, c, depth+1, file), nil)
	restoreFails(t, s, chain(t, c, 2048, file), nil)
}

// TestSaveDeepTree: a sandbox's directories nested deeper than a
// checkpoint holds are left out (and said so); the rest is checkpointed
// and restores.
func TestSaveDeepTree(t *testing.T) {
	s, _ := newShared(t)
	src := t.TempDir()
	write(t, src, "top.txt", "top", 0o644)
	deep := strings.Repeat("d/", 400)
	must(t, os.MkdirAll(filepath.Join(src, deep), 0o755))
	write(t, src, deep+"bottom.txt", "bottom", 0o644)
	root, err := os.OpenRoot(src)
	must(t, err)
	defer root.Close()
	start := time.Now()
	_, st, err := s.Save(t.Context(), "job1", workspace.TreeWorkspace, root, nil, workspace.Checkpoint{Step: 1})
	must(t, err)
	if len(st.Skipped) != 1 || !strings.Contains(st.Skipped[0], "deeper than 256 directories") {
		t.Errorf("skipped %q; want the part deeper than 256 directories", st.Skipped)
	}
	c, err := s.Latest(t.Context(), "job1", workspace.TreeWorkspace)
	must(t, err)
	dst := filepath.Join(t.TempDir(), "ws")
	_, err = s.Restore(t.Context(), "job1", c, dst)
	must(t, err)
	if b, err := os.ReadFile(filepath.Join(dst, "top.txt")); string(b) != "top" {
		t.Errorf("top.txt: %q, %v", b, err)
	}
	t.Logf("a tree 400 deep: saved and restored in %v", time.Since(start))
}

// TestRestoreTooManyEntries refuses one tree of more entries than a
// checkpoint holds before it writes any.
func TestRestoreTooManyEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("puts a tree of 500,001 entries")
	}
	s, c, _ := newCounting(t)
	file := putBlob(t, c, []byte("x"))
	entries := make([]map[string]any, 500_001)
	for i := range entries {
		entries[i] = map[string]any{"name": fmt.Sprintf("f%07d", i), "kind": "file", "digest": file, "size": 1}
	}
	restoreFails(t, s, putTree(t, c, entries...), workspace.ErrTooLarge)
}

// TestMaterializeHostileRef: a ref that is not a Checkpoint, or names no
// digest, is an error of Materialize, and leaves no directory in the cache.
func TestMaterializeHostileRef(t *testing.T) {
	s, c, blobDir := newCounting(t)
	for _, ref := range []string{`{"manifest":"../../x"}`, `not json`, `{"manifest":""}`, `{"manifest":"` + blobs.Digest([]byte("none")) + `"}`} {
		must(t, c.SetRef(t.Context(), "job1", workspace.TreeWorkspace, []byte(ref)))
		if d, _, err := s.Materialize(t.Context(), "job1", workspace.TreeWorkspace); err == nil {
			t.Errorf("ref %s: materialized as %s", ref, d)
		}
	}
	var left []string
	_ = filepath.WalkDir(filepath.Join(filepath.Dir(blobDir), "cache"), func(p string, d os.DirEntry, err error) error {
		if err == nil && (!d.IsDir() || strings.Contains(p, ".restore-")) {
			left = append(left, p)
		}
		return nil
	})
	if len(left) != 0 {
		t.Errorf("left in the cache: %v", left)
	}
}
