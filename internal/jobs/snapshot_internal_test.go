package jobs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/workspace"
)

// TestSnapshotsReuseAndRemove: requests at once share one snapshot; a
// fresh one is reused; a stale one is replaced, and removed once no
// request holds it; a job's are removed when it ends.
func TestSnapshotsReuseAndRemove(t *testing.T) {
	s, err := NewService(ServiceConfig{Snapshots: filepath.Join(t.TempDir(), "snapshots")})
	if err != nil {
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

// TestSnapshotKeepsTheFloor: a snapshot is a copy of up to
// SnapshotMaxBytes (and SnapshotMaxEntries entries, each a block at least)
// written to the data dir outside any job's disk quota, SnapshotsAtOnce of
// them at a time. Checking only that the free space is over the floor
// (AGENTBOX_MIN_FREE_DISK) before one starts lets two of them, asked for
// by any client, take the filesystem that much under it; with a small
// floor, fill it. One is refused unless what they may write fits over it.
func TestSnapshotKeepsTheFloor(t *testing.T) {
	const floor = 1 << 30
	free := int64(floor + 100<<20) // over the floor, not by two snapshots' worth
	s := &Service{repos: &Repos{MinFree: floor, DiskFree: func(string) (int64, error) { return free, nil }}}
	_, err := s.copyLive(context.Background(), "j1", filepath.Join(t.TempDir(), "j1.1"))
	if err == nil || !strings.Contains(err.Error(), "AGENTBOX_MIN_FREE_DISK") || !errors.Is(err, ErrNotEnded) {
		t.Fatalf("snapshot with %d MiB over the floor: %v; want a refusal naming AGENTBOX_MIN_FREE_DISK", (free-floor)>>20, err)
	}
	free = floor + SnapshotsAtOnce*snapshotFootprint
	if _, err := s.copyLive(context.Background(), "j1", filepath.Join(t.TempDir(), "j1.2")); err == nil || strings.Contains(err.Error(), "AGENTBOX_MIN_FREE_DISK") {
		t.Fatalf("snapshot with room for %d over the floor: %v; want it let through to the job's sandbox (none here)", SnapshotsAtOnce, err)
	}
}

// TestDeleteRemovesSnapshot: a snapshot of a job taken while it ran is a
// copy of its files in the data dir. It outlived the job's end (dropped
// only when its files were next asked for, which a deleted job's never
// are) and so DELETE, and the retention janitor, left that copy on disk.
func TestDeleteRemovesSnapshot(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "agentbox.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s, err := NewService(ServiceConfig{Store: st, Workspaces: workspace.NewLocal(dir), Snapshots: filepath.Join(dir, "snapshots")})
	if err != nil {
		t.Fatal(err)
	}
	id := NewID()
	now := time.Now().UTC()
	if _, _, err := st.CreateJob(t.Context(), store.Job{ID: id, Task: "t", Status: store.StatusComplete, MaxAttempts: 3,
		CreatedAt: now.Add(-time.Hour), StartedAt: now.Add(-time.Hour), EndedAt: now}); err != nil {
		t.Fatal(err)
	}
	// Taken while the job ran, by a request that has ended since.
	ctx, cancel := context.WithCancel(t.Context())
	sn, err := s.snaps.get(ctx, id, func(d string) ([]string, error) {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		return nil, os.WriteFile(filepath.Join(d, "secret.txt"), []byte("secret\n"), 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := s.Delete(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	waitGone(t, sn.dir)
}

// TestSnapshotsHeldAreBounded: a request holds the snapshot it reads
// until it ends, and a snapshot held is never removed. A client that
// reads each zip of a running job slowly, asking again once the last
// snapshot is stale, made a new one each time and kept them all: copies
// of up to 100,000 entries each in the data dir, with no bound on how
// many. Past snapshotsMax held at once, a new one is refused until one
// is let go.
func TestSnapshotsHeldAreBounded(t *testing.T) {
	s, err := NewService(ServiceConfig{Snapshots: filepath.Join(t.TempDir(), "snapshots")})
	if err != nil {
		t.Fatal(err)
	}
	take := func(dir string) ([]string, error) { return nil, os.MkdirAll(dir, 0o700) }
	stale := func(sn *snap) {
		s.snaps.mu.Lock()
		sn.taken = time.Now().Add(-time.Hour)
		s.snaps.mu.Unlock()
	}
	var held []*snap
	var first context.CancelFunc
	for i := range snapshotsMax {
		ctx, cancel := context.WithCancel(t.Context())
		if i == 0 {
			first = cancel
		} else {
			defer cancel()
		}
		sn, err := s.snaps.get(ctx, "j1", take)
		if err != nil {
			t.Fatalf("snapshot %d: %v", i+1, err)
		}
		stale(sn)
		held = append(held, sn)
	}
	_, err = s.snaps.get(t.Context(), "j1", take)
	if !errors.Is(err, ErrNotEnded) || !strings.Contains(err.Error(), "retry") {
		t.Fatalf("snapshot %d while %d are held: %v; want ErrNotEnded saying to retry", snapshotsMax+1, snapshotsMax, err)
	}
	for _, sn := range held {
		if _, err := os.Stat(sn.dir); err != nil {
			t.Fatalf("a held snapshot was removed: %v", err)
		}
	}
	first()
	waitGone(t, held[0].dir)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if _, err := s.snaps.get(ctx, "j1", take); err != nil {
		t.Fatalf("a snapshot once one was let go: %v", err)
	}
}
