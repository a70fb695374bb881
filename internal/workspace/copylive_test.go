package workspace_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/workspace"
)

// TestCopyLiveSwap: while one goroutine swaps a directory of the source
// for a symlink to / (and back) as fast as it can, CopyLive copies the
// tree again and again: each copy holds d as the directory it was (with
// its one file) or as the link, never anything of the host's /; what
// changed under a walk is skipped, never the copy's failure.
func TestCopyLiveSwap(t *testing.T) {
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "keep.txt"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(src, "d")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			os.RemoveAll(d)
			os.Mkdir(d, 0o755)
			os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o644)
			os.RemoveAll(d)
			os.Symlink("/", d)
		}
	}()
	root, err := os.OpenRoot(src)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	out := t.TempDir()
	skippedAny := 0
	for i := range 300 {
		dst := filepath.Join(out, fmt.Sprint("c", i))
		skipped, err := workspace.CopyLive(context.Background(), root, dst, workspace.Limits{})
		if err != nil {
			cancel()
			wg.Wait()
			t.Fatalf("copy %d: %v", i, err)
		}
		skippedAny += len(skipped)
		checkCopy(t, dst)
		os.RemoveAll(dst)
	}
	cancel()
	wg.Wait()
	t.Logf("300 copies under the swap, %d entries skipped as changed", skippedAny)
}

// checkCopy fails the test if the copy at dst holds anything but
// keep.txt, d (a directory holding at most f, or a link) and nothing of
// the host.
func checkCopy(t *testing.T, dst string) {
	t.Helper()
	filepath.WalkDir(dst, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == dst {
			return nil
		}
		rel, _ := filepath.Rel(dst, p)
		switch rel {
		case "keep.txt", "d", "d/f":
		default:
			t.Errorf("the copy holds %s", rel)
		}
		if rel == "d" && e.Type()&fs.ModeSymlink != 0 {
			if target, _ := os.Readlink(p); target != "/" {
				t.Errorf("d links to %q", target)
			}
		}
		return nil
	})
}
