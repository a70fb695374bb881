package workspace_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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

// TestCopyLiveSkippedBounded is a sandbox's attack on the server's memory
// through a snapshot: thousands of FIFOs (free to make, never copied) with
// long names deep down, each of which the copy used to name in skipped,
// path and all: 4 KiB of the server's memory a FIFO, gigabytes for the
// inodes of a sandbox's disk. What skipped holds is bounded, and says how
// many more were left out.
func TestCopyLiveSkippedBounded(t *testing.T) {
	src := t.TempDir()
	deep := src
	for range 8 {
		deep = filepath.Join(deep, strings.Repeat("d", 250))
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	const fifos = 3000
	for i := range fifos {
		if err := syscall.Mkfifo(filepath.Join(deep, fmt.Sprintf("%s%d", strings.Repeat("f", 240), i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(src)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	skipped, err := workspace.CopyLive(context.Background(), root, filepath.Join(t.TempDir(), "copy"), workspace.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range skipped {
		n += len(s)
	}
	if n > 256<<10 {
		t.Errorf("skipped holds %d notes, %d bytes, for %d FIFOs", len(skipped), n, fifos)
	}
	if last := skipped[len(skipped)-1]; !strings.Contains(last, "more") {
		t.Errorf("skipped's last note %q does not say how many more were left out", last)
	}
}
