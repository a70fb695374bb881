package workspace_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/blobs"
	"github.com/agentbox/agentbox/internal/blobs/dirblobs"
	"github.com/agentbox/agentbox/internal/workspace"
)

// batched is a directory store with the Batcher ability a database has,
// counting the batches it is given.
type batched struct {
	*dirblobs.Store
	batches int
}

func (b *batched) PutBatch(ctx context.Context, ns string, bs []blobs.Blob) (int, int64, error) {
	if err := blobs.CheckBatch(ns, bs); err != nil {
		return 0, 0, err
	}
	b.batches++
	added, n := 0, int64(0)
	for _, x := range bs {
		if ok, err := b.Has(ctx, ns, x.Digest); err != nil || ok {
			if err != nil {
				return 0, 0, err
			}
			continue
		}
		if err := b.Put(ctx, ns, x.Digest, int64(len(x.Data)), strings.NewReader(string(x.Data))); err != nil {
			return 0, 0, err
		}
		added, n = added+1, n+int64(len(x.Data))
	}
	return added, n, nil
}

// TestCheckpointBatched: with a store that batches, a checkpoint of many
// small files puts them in a few batches (a large file still streams),
// counts what was new, and restores to the same tree; a 1-file change
// puts one file.
func TestCheckpointBatched(t *testing.T) {
	dir := t.TempDir()
	d, err := dirblobs.New(filepath.Join(dir, "blobs"))
	must(t, err)
	b := &batched{Store: d}
	s := workspace.NewShared(b, filepath.Join(dir, "cache"))
	src := t.TempDir()
	for i := range 300 {
		write(t, src, fmt.Sprintf("d%d/f%03d.go", i%7, i), fmt.Sprintf("package d\n// %d\n", i), 0o644)
	}
	write(t, src, "big.bin", strings.Repeat("x", blobs.MaxBatchBlob+1), 0o600)
	snap, st := save(t, s, "job1", src, nil, 0)
	if st.Files != 301 || st.Uploaded != 301 || b.batches != 2 {
		t.Fatalf("first: %+v in %d batches; want 301 files uploaded, the small ones in one batch and the trees in another", st, b.batches)
	}
	write(t, src, "d3/f010.go", "package d\n// changed\n", 0o644)
	_, st = save(t, s, "job1", src, snap, 1)
	if st.Uploaded != 1 || st.UploadedBytes != int64(len("package d\n// changed\n")) {
		t.Errorf("one file changed: %+v, want 1 upload", st)
	}
	c, err := s.Latest(t.Context(), "job1", workspace.TreeWorkspace)
	must(t, err)
	dst := filepath.Join(t.TempDir(), "ws")
	_, err = s.Restore(t.Context(), "job1", c, dst)
	must(t, err)
	sameTree(t, describe(t, dst), describe(t, src))
}
