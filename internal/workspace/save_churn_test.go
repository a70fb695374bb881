package workspace_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/blobs/dirblobs"
	"github.com/agentbox/agentbox/internal/workspace"
)

// TestSaveWhileChurned checkpoints a tree a sandbox rewrites, renames,
// deletes and swaps directories of for symlinks to a secret outside it
// all the while: each Save succeeds or fails with an error within its
// deadline, never takes the secret through a link, and the latest
// checkpoint, if any, restores to a tree without it.
func TestSaveWhileChurned(t *testing.T) {
	s, _ := newShared(t)
	outside := t.TempDir()
	write(t, outside, "secret.txt", "SECRET", 0o644)
	src := t.TempDir()
	for i := range 20 {
		write(t, src, fmt.Sprintf("d/f%d", i), "data", 0o644)
	}
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		d, moved, link := filepath.Join(src, "d"), filepath.Join(src, "moved"), filepath.Join(src, "d")
		for i := 0; ctx.Err() == nil; i++ {
			_ = os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d", i%20)), []byte(strings.Repeat("x", i%5000)), 0o644)
			_ = os.Rename(d, moved)
			_ = os.Symlink(outside, link)
			_ = os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(src, "s"))
			_ = os.Remove(link)
			_ = os.Remove(filepath.Join(src, "s"))
			_ = os.Rename(moved, d)
			_ = os.Remove(filepath.Join(d, fmt.Sprintf("f%d", (i+7)%20)))
		}
	})
	var snap *workspace.Snapshot
	saved := 0
	for step := range 40 {
		root, err := os.OpenRoot(src)
		must(t, err)
		sctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		next, _, err := s.Save(sctx, "job1", workspace.TreeWorkspace, root, snap, workspace.Checkpoint{Step: step})
		hung := sctx.Err() != nil
		cancel()
		root.Close()
		if hung {
			t.Fatalf("step %d: the checkpoint hung: %v", step, err)
		}
		if err == nil {
			snap, saved = next, saved+1
		} else {
			t.Logf("step %d: %v", step, err)
		}
	}
	stop()
	wg.Wait()
	// An entry gone or replaced between its directory's listing and its
	// read is left out, not the checkpoint's failure: a sandbox churning
	// files at every step boundary still has its checkpoints (before, 0 to
	// 8 of 40 were saved here).
	t.Logf("%d of 40 checkpoints saved", saved)
	if saved < 36 {
		t.Errorf("%d of 40 checkpoints saved under churn; want nearly all", saved)
	}
	ck, err := s.Latest(t.Context(), "job1", workspace.TreeWorkspace)
	if saved == 0 {
		return
	}
	must(t, err)
	dst := filepath.Join(t.TempDir(), "ws")
	_, err = s.Restore(t.Context(), "job1", ck, dst)
	must(t, err)
	_ = filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), "SECRET") {
				t.Errorf("%s: the secret outside the tree, through a link", p)
			}
		}
		return nil
	})
}

// failingPuts is a directory store whose Puts fail as a store whose
// directory was unmounted does: "no such file or directory".
type failingPuts struct{ *dirblobs.Store }

func (f failingPuts) Put(context.Context, string, string, int64, io.Reader) error {
	return &fs.PathError{Op: "open", Path: "/mnt/blobs/.tmp/put-1", Err: fs.ErrNotExist}
}

// TestSaveStoreFailureFails: an error of the blob store is the
// checkpoint's failure, never taken for a file that vanished and left
// out (a checkpoint of nothing would then restore an empty workspace).
func TestSaveStoreFailureFails(t *testing.T) {
	d, err := dirblobs.New(t.TempDir())
	must(t, err)
	s := workspace.NewShared(failingPuts{d}, t.TempDir())
	src := t.TempDir()
	write(t, src, "a/b.txt", "data", 0o644)
	root, err := os.OpenRoot(src)
	must(t, err)
	defer root.Close()
	if _, _, err := s.Save(t.Context(), "job1", workspace.TreeWorkspace, root, nil, workspace.Checkpoint{Step: 1}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Save with a failing store: %v, want its error", err)
	}
	if _, err := s.Latest(t.Context(), "job1", workspace.TreeWorkspace); !errors.Is(err, workspace.ErrNotFound) {
		t.Errorf("a failed checkpoint became the latest: %v", err)
	}
}
