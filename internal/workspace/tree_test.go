package workspace_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/blobs"
	"github.com/agentbox/agentbox/internal/blobs/dirblobs"
	"github.com/agentbox/agentbox/internal/workspace"
)

// countingStore is a blob store that records the digests put.
type countingStore struct {
	blobs.Store
	mu   sync.Mutex
	puts []string
}

func (c *countingStore) Put(ctx context.Context, ns, digest string, size int64, r io.Reader) error {
	c.mu.Lock()
	c.puts = append(c.puts, digest)
	c.mu.Unlock()
	return c.Store.Put(ctx, ns, digest, size, r)
}

// take returns the digests put since the last take.
func (c *countingStore) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.puts
	c.puts = nil
	return p
}

// newCounting returns a Shared over a counting dirblobs store, the
// store, and its directory.
func newCounting(t *testing.T) (*workspace.Shared, *countingStore, string) {
	t.Helper()
	dir := t.TempDir()
	b, err := dirblobs.New(filepath.Join(dir, "blobs"))
	must(t, err)
	c := &countingStore{Store: b}
	return workspace.NewShared(c, filepath.Join(dir, "cache")), c, b.Dir()
}

// TestCheckpointPutsThePath changes one file of a tree of several
// directories: its blob and the trees of its directory and each ancestor
// are put, nothing else; an unchanged tree puts nothing, even without a
// Snapshot.
func TestCheckpointPutsThePath(t *testing.T) {
	s, c, _ := newCounting(t)
	src := t.TempDir()
	for i := range 40 {
		write(t, src, fmt.Sprintf("a/b/c/f%d.go", i), fmt.Sprintf("c %d", i), 0o644)
		write(t, src, fmt.Sprintf("a/x%d.go", i), fmt.Sprintf("a %d", i), 0o644)
		write(t, src, fmt.Sprintf("d/e/y%d.go", i), fmt.Sprintf("d %d", i), 0o644)
	}
	snap, st := save(t, s, "job1", src, nil, 0)
	// 120 files, trees of ., a, a/b, a/b/c, d, d/e.
	if got := len(c.take()); got != 126 || st.Trees != 6 || st.TreesUploaded != 6 || st.Entries != 125 {
		t.Fatalf("first: %d puts, %+v", got, st)
	}
	write(t, src, "a/b/c/f7.go", "changed", 0o644)
	snap, st = save(t, s, "job1", src, snap, 1)
	puts := c.take()
	if len(puts) != 5 || !slices.Contains(puts, blobs.Digest([]byte("changed"))) {
		t.Errorf("one file changed: %d puts, want its blob and the trees of a/b/c, a/b, a and the root", len(puts))
	}
	if st.Uploaded != 1 || st.TreesUploaded != 4 || st.Trees != 6 || st.TreeBytes == 0 {
		t.Errorf("one file changed: %+v", st)
	}
	if puts[len(puts)-1] != snap.Manifest() {
		t.Errorf("the root's tree is not the last put")
	}
	if _, st = save(t, s, "job1", src, snap, 2); len(c.take()) != 0 || st.TreesUploaded != 0 {
		t.Errorf("nothing changed: %+v", st)
	}
	if _, st = save(t, s, "job1", src, nil, 3); len(c.take()) != 0 || st.Uploaded != 0 {
		t.Errorf("nothing changed, no snapshot: %+v", st)
	}
	dst := filepath.Join(t.TempDir(), "ws")
	ck, err := s.Latest(t.Context(), "job1", workspace.TreeWorkspace)
	must(t, err)
	rsnap, err := s.Restore(t.Context(), "job1", ck, dst)
	must(t, err)
	sameTree(t, describe(t, dst), describe(t, src))
	if _, st = save(t, s, "job1", dst, rsnap, 4); len(c.take()) != 0 {
		t.Errorf("the restored tree saved again: %+v", st)
	}
}

// putTree puts a tree blob of entries into the store, as Save would, and
// returns its digest.
func putTree(t *testing.T, b blobs.Store, entries ...map[string]any) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"version": 2, "entries": entries})
	must(t, err)
	return putBlob(t, b, data)
}

func putBlob(t *testing.T, b blobs.Store, data []byte) string {
	t.Helper()
	d := blobs.Digest(data)
	must(t, b.Put(t.Context(), "job1", d, int64(len(data)), bytes.NewReader(data)))
	return d
}

// restoreFails restores the tree root: it fails with an error that is
// want (if not nil), leaving nothing.
func restoreFails(t *testing.T, s *workspace.Shared, root string, want error) {
	t.Helper()
	parent := t.TempDir()
	_, err := s.Restore(t.Context(), "job1", workspace.Checkpoint{Manifest: root}, filepath.Join(parent, "ws"))
	if err == nil || want != nil && !errors.Is(err, want) {
		t.Errorf("restore: %v, want an error (%v)", err, want)
	}
	if ents, _ := os.ReadDir(parent); len(ents) != 0 {
		t.Errorf("left behind: %v", ents)
	}
}

// TestRestoreTamperedTree overwrites a subdirectory's tree in the store,
// then the root's: the restore fails, leaving nothing.
func TestRestoreTamperedTree(t *testing.T) {
	s, c, blobDir := newCounting(t)
	src := t.TempDir()
	write(t, src, "a.txt", "alpha", 0o644)
	write(t, src, "sub/b.txt", "bravo", 0o644)
	save(t, s, "job1", src, nil, 0)
	ck, err := s.Latest(t.Context(), "job1", workspace.TreeWorkspace)
	must(t, err)
	var sub string
	for _, d := range c.take() {
		if d != ck.Manifest && d != blobs.Digest([]byte("alpha")) && d != blobs.Digest([]byte("bravo")) {
			sub = d
		}
	}
	object := func(d string) string { return filepath.Join(blobDir, "job1", "objects", d[:2], d) }
	evil := putTree(t, c, map[string]any{"name": "evil", "kind": "file", "digest": blobs.Digest([]byte("alpha")), "size": 5})
	data, err := os.ReadFile(object(evil))
	must(t, err)
	must(t, os.WriteFile(object(sub), data, 0o600))
	restoreFails(t, s, ck.Manifest, blobs.ErrCorrupt)
	must(t, os.WriteFile(object(ck.Manifest), data, 0o600))
	restoreFails(t, s, ck.Manifest, blobs.ErrCorrupt)
}

// TestRestoreBadTrees refuses trees Save does not write: names that are
// not one element, unknown kinds, entries out of order or twice, bits
// beyond the permissions, unknown fields.
func TestRestoreBadTrees(t *testing.T) {
	s, c, _ := newCounting(t)
	file := blobs.Digest([]byte("x"))
	putBlob(t, c, []byte("x"))
	sub := putTree(t, c, map[string]any{"name": "f", "kind": "file", "digest": file, "size": 1})
	f := func(name string) map[string]any {
		return map[string]any{"name": name, "kind": "file", "digest": file, "size": 1}
	}
	for name, entries := range map[string][]map[string]any{
		"dot-dot":   {f("../x")},
		"a slash":   {f("a/b")},
		"dot":       {{"name": ".", "kind": "dir", "digest": sub}},
		"dots":      {{"name": "..", "kind": "dir", "digest": sub}},
		"empty":     {f("")},
		"kind":      {{"name": "p", "kind": "fifo"}},
		"hardlink":  {{"name": "p", "kind": "hardlink", "target": "f"}},
		"twice":     {f("a"), f("a")},
		"order":     {f("b"), f("a")},
		"setuid":    {{"name": "a", "kind": "file", "digest": file, "size": 1, "mode": 0o4755}},
		"no digest": {{"name": "a", "kind": "dir"}},
		"unknown":   {{"name": "a", "kind": "file", "digest": file, "size": 1, "uid": 0}},
	} {
		t.Run(name, func(t *testing.T) {
			restoreFails(t, s, putTree(t, c, entries...), nil)
		})
	}
	restoreFails(t, s, putBlob(t, c, []byte(`{"version":1,"entries":[{"path":"a","kind":"dir"}]}`)), nil)
}

// TestRestoreSharedSubtree restores a tree naming one subtree twice, then
// one naming a subtree of 1,000 entries 1,000 times: the entries of every
// place it appears count, so the second is refused.
func TestRestoreSharedSubtree(t *testing.T) {
	s, c, _ := newCounting(t)
	file := blobs.Digest([]byte("x"))
	putBlob(t, c, []byte("x"))
	var many []map[string]any
	for i := range 1000 {
		many = append(many, map[string]any{"name": fmt.Sprintf("f%04d", i), "kind": "file", "digest": file, "size": 1, "mode": 0o644})
	}
	sub := putTree(t, c, many...)
	dirs := func(n int) []map[string]any {
		var ds []map[string]any
		for i := range n {
			ds = append(ds, map[string]any{"name": fmt.Sprintf("d%04d", i), "kind": "dir", "digest": sub, "mode": 0o755})
		}
		return ds
	}
	dst := filepath.Join(t.TempDir(), "ws")
	if _, err := s.Restore(t.Context(), "job1", workspace.Checkpoint{Manifest: putTree(t, c, dirs(2)...)}, dst); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"d0000/f0999", "d0001/f0000"} {
		if b, err := os.ReadFile(filepath.Join(dst, p)); string(b) != "x" {
			t.Errorf("%s: %q, %v", p, b, err)
		}
	}
	restoreFails(t, s, putTree(t, c, dirs(1000)...), workspace.ErrTooLarge)
}
