package workspace_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentbox/agentbox/internal/blobs/dirblobs"
	"github.com/agentbox/agentbox/internal/workspace"
)

// TestMaterializeWhileSaved: readers on two replicas sharing one cache
// directory (the worst case: two processes) open a running job's files
// while its worker replaces the checkpoint at every step. Every Open
// succeeds; a read fails only as a file gone (its materialization was
// replaced under it), never otherwise; afterwards the cache holds no
// temporary directory and at most the newest materialization and one
// replaced.
func TestMaterializeWhileSaved(t *testing.T) {
	dir := t.TempDir()
	b, err := dirblobs.New(filepath.Join(dir, "blobs"))
	must(t, err)
	cache := filepath.Join(dir, "cache")
	worker := workspace.NewShared(b, filepath.Join(dir, "worker"))
	replicas := []*workspace.Shared{workspace.NewShared(b, cache), workspace.NewShared(b, cache)}
	src := t.TempDir()
	for i := range 50 {
		write(t, src, fmt.Sprintf("d%d/f%d.txt", i%5, i), "v0", 0o644)
	}
	snap, _ := save(t, worker, "job1", src, nil, 0)

	const steps, readers = 25, 8
	var done atomic.Bool
	var gone, reads atomic.Int64
	errs := make(chan error, readers)
	var wg sync.WaitGroup
	for r := range readers {
		s := replicas[r%2]
		wg.Go(func() {
			for !done.Load() {
				root, err := s.Open(t.Context(), "job1")
				if err != nil {
					errs <- fmt.Errorf("open: %w", err)
					return
				}
				_, err = root.ReadFile(fmt.Sprintf("d%d/f%d.txt", r%5, r))
				root.Close()
				switch {
				case errors.Is(err, fs.ErrNotExist):
					gone.Add(1)
				case err != nil:
					errs <- fmt.Errorf("read: %w", err)
					return
				}
				reads.Add(1)
			}
		})
	}
	for step := 1; step <= steps; step++ {
		write(t, src, fmt.Sprintf("d%d/f%d.txt", step%5, step), fmt.Sprintf("v%d", step), 0o644)
		snap, _ = save(t, worker, "job1", src, snap, step)
	}
	done.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d reads, %d of a replaced materialization's file", reads.Load(), gone.Load())
	var temps []string
	_ = filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), ".") {
			temps = append(temps, p)
		}
		return nil
	})
	if len(temps) != 0 {
		t.Errorf("temporary directories left in the cache: %v", temps)
	}
	if ents, err := os.ReadDir(filepath.Join(cache, "job1", workspace.TreeWorkspace)); err != nil || len(ents) > 2 {
		t.Errorf("materializations kept: %d, %v; want at most 2", len(ents), err)
	}
}
