package workspace_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
