package dirblobs_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/blobs"
	"github.com/agentbox/agentbox/internal/blobs/blobstest"
	"github.com/agentbox/agentbox/internal/blobs/dirblobs"
)

func TestConformance(t *testing.T) {
	blobstest.Run(t, func(t *testing.T) blobs.Store {
		s, err := dirblobs.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestRemovesStale: a store opened on a directory a crashed process wrote
// in removes its temporary files and removed namespaces older than an
// hour, and leaves a Put under way (a fresh temporary file) alone.
func TestRemovesStale(t *testing.T) {
	dir := t.TempDir()
	stale, fresh := filepath.Join(dir, ".tmp", "put-1"), filepath.Join(dir, ".tmp", "put-2")
	trash := filepath.Join(dir, ".trash-1", "job_a", "objects")
	for _, p := range []string{stale, fresh, filepath.Join(trash, "x")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * time.Hour)
	for _, p := range []string{stale, filepath.Join(dir, ".trash-1")} {
		if err := os.Chtimes(p, long, long); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dirblobs.New(dir); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{stale: false, filepath.Join(dir, ".trash-1"): false, fresh: true} {
		if _, err := os.Lstat(p); (err == nil) != want {
			t.Errorf("%s after New: %v; want it there: %v", p, err, want)
		}
	}
}
