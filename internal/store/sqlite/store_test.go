package sqlite_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
)

func TestCreateDefaults(t *testing.T) {
	s := openClosed(t, filepath.Join(t.TempDir(), "s.db"), sqlite.Options{})
	before := time.Now()
	j, created, err := s.CreateJob(t.Context(), store.Job{ID: "a", Task: "t"})
	if err != nil || !created {
		t.Fatalf("CreateJob: %v %v", created, err)
	}
	if j.Status != store.StatusPending || j.CreatedAt.Before(before.Add(-time.Second)) || !j.UpdatedAt.Equal(j.CreatedAt) {
		t.Errorf("defaults: status %q created %v updated %v", j.Status, j.CreatedAt, j.UpdatedAt)
	}
}

func TestInvalidInput(t *testing.T) {
	s := openClosed(t, filepath.Join(t.TempDir(), "s.db"), sqlite.Options{})
	ctx := t.Context()
	if _, _, err := s.CreateJob(ctx, store.Job{ID: "a", Task: "t"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  func() error
		want error // nil: any error
	}{
		{"duplicate id", func() error { _, _, err := s.CreateJob(ctx, store.Job{ID: "a", Task: "t"}); return err }, store.ErrConflict},
		{"empty id", func() error { _, _, err := s.CreateJob(ctx, store.Job{Task: "t"}); return err }, nil},
		{"bad status", func() error { _, _, err := s.CreateJob(ctx, store.Job{ID: "b", Status: "weird"}); return err }, nil},
		{"bad sandbox", func() error {
			_, _, err := s.CreateJob(ctx, store.Job{ID: "c", Sandbox: json.RawMessage("{")})
			return err
		}, nil},
		{"bad payload", func() error { _, err := s.AppendEvent(ctx, "a", "log", json.RawMessage("nope")); return err }, nil},
		{"bad cursor", func() error { _, err := s.ListJobs(ctx, store.ListOptions{Cursor: "!!"}); return err }, sqlite.ErrBadCursor},
		{"update to bad status", func() error {
			_, err := s.UpdateJob(ctx, "a", func(j *store.Job) error { j.Status = "weird"; return nil })
			return err
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
}

// TestTwoStoresOneFile claims from two Stores on one file, as two processes
// would: each job is claimed once.
func TestTwoStoresOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	stores := []*sqlite.Store{openClosed(t, path, sqlite.Options{}), openClosed(t, path, sqlite.Options{})}
	for i := range 100 {
		if _, _, err := stores[i%2].CreateJob(t.Context(), store.Job{ID: fmt.Sprint(i), Task: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	claimed := map[string]int{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for {
				j, err := stores[w%2].ClaimJob(t.Context(), fmt.Sprint("w", w), time.Minute)
				if err != nil {
					if !errors.Is(err, store.ErrNoJob) {
						t.Errorf("ClaimJob: %v", err)
					}
					return
				}
				mu.Lock()
				claimed[j.ID]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for id, n := range claimed {
		if n != 1 {
			t.Errorf("job %s claimed %d times", id, n)
		}
	}
	if len(claimed) != 100 {
		t.Errorf("%d of 100 jobs claimed", len(claimed))
	}
}
