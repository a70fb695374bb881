package jobs

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSnapshotsReuseAndRemove: requests at once share one snapshot; a
// fresh one is reused; a stale one is replaced, and removed once no
// request holds it; a job's are removed when it ends.
func TestSnapshotsReuseAndRemove(t *testing.T) {
	s := &Service{}
	if err := s.SetSnapshots(filepath.Join(t.TempDir(), "snapshots")); err != nil {
		t.Fatal(err)
	}
	var takes atomic.Int32
	release := make(chan struct{})
	take := func(dir string) ([]string, error) {
		takes.Add(1)
		<-release
		return nil, os.MkdirAll(dir, 0o700)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	got := make([]*snap, 4)
	for i := range got {
		wg.Go(func() {
			sn, err := s.snaps.get(ctx, "j1", take)
			if err != nil {
				t.Error(err)
			}
			got[i] = sn
		})
	}
	for takes.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if takes.Load() != 1 || got[0] != got[3] {
		t.Fatalf("%d snapshots taken for 4 requests at once", takes.Load())
	}
	first := got[0]
	if sn, _ := s.snaps.get(ctx, "j1", take); sn != first || takes.Load() != 1 {
		t.Fatal("a fresh snapshot was taken again")
	}
	// Stale: the next request takes another; the first stays while held.
	s.snaps.mu.Lock()
	first.taken = time.Now().Add(-time.Hour)
	s.snaps.mu.Unlock()
	later, cancelLater := context.WithCancel(context.Background())
	second, err := s.snaps.get(later, "j1", take)
	if err != nil || second == first || takes.Load() != 2 {
		t.Fatalf("a stale snapshot was reused (%d taken, %v)", takes.Load(), err)
	}
	if _, err := os.Stat(first.dir); err != nil {
		t.Fatalf("a held snapshot was removed: %v", err)
	}
	cancel() // the requests holding the first end
	waitGone(t, first.dir)
	s.dropSnapshot("j1") // the job ended; a request still holds the second
	if _, err := os.Stat(second.dir); err != nil {
		t.Fatalf("a held snapshot was removed: %v", err)
	}
	cancelLater()
	waitGone(t, second.dir)
}

func waitGone(t *testing.T, dir string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still there", dir)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
