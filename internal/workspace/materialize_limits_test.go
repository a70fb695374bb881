package workspace_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/workspace"
)

// TestMaterializeChurn: a client that reads a running job's workspace
// after each of its steps makes a replica materialize each checkpoint; it
// keeps no more than the latest and the one before for their readers,
// not a whole copy per step.
func TestMaterializeChurn(t *testing.T) {
	s, _ := newShared(t)
	src := t.TempDir()
	var snap *workspace.Snapshot
	var dir string
	for step := range 6 {
		write(t, src, "a.txt", strings.Repeat("x", step+1), 0o644)
		snap, _ = save(t, s, "job1", src, snap, step)
		var err error
		dir, _, err = s.Materialize(t.Context(), "job1", workspace.TreeWorkspace)
		must(t, err)
	}
	ents, err := os.ReadDir(filepath.Dir(dir))
	must(t, err)
	if len(ents) > 2 {
		t.Errorf("%d materializations of job1's workspace kept, want 2 at most", len(ents))
	}
}

// TestMaterializeIdleEvicted: the materializations of a job no one read
// for an hour leave the replica's cache (and what a crash left at its
// top); those of a job read since stay.
func TestMaterializeIdleEvicted(t *testing.T) {
	s, _ := newShared(t)
	src := t.TempDir()
	write(t, src, "a.txt", "a", 0o644)
	save(t, s, "job1", src, nil, 1)
	save(t, s, "job2", src, nil, 1)
	old, _, err := s.Materialize(t.Context(), "job1", workspace.TreeWorkspace)
	must(t, err)
	fresh, _, err := s.Materialize(t.Context(), "job2", workspace.TreeWorkspace)
	must(t, err)
	cache := filepath.Dir(filepath.Dir(filepath.Dir(old)))
	leftover := filepath.Join(cache, ".make-crashed")
	must(t, os.MkdirAll(filepath.Join(leftover, "x"), 0o700))
	long := time.Now().Add(-workspace.Idle - time.Minute)
	for _, p := range []string{filepath.Join(cache, "job1"), leftover} {
		must(t, os.Chtimes(p, long, long))
	}
	s.SweepNow()
	for _, p := range []string{old, leftover} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s after the sweep: %v, want it removed", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(fresh, "a.txt")); err != nil {
		t.Errorf("a job read a moment ago lost its materialization: %v", err)
	}
	again, _, err := s.Materialize(t.Context(), "job1", workspace.TreeWorkspace)
	must(t, err)
	if b, err := os.ReadFile(filepath.Join(again, "a.txt")); string(b) != "a" {
		t.Errorf("job1 materialized again: %q, %v", b, err)
	}
}
