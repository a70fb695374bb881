package githost_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/githost"
)

// newlines writes a file of n newlines: the cheapest bytes to write and
// the dearest for a text diff (about 44 bytes of git's memory each).
func newlines(t *testing.T, dir, name string, n int) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), bytes.Repeat([]byte("\n"), n), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBigFileIsBinaryToDiff: a file over BigFile, new or changed, is
// named as binary in the diff instead of diffed line by line; a small
// one beside it is diffed as text.
func TestBigFileIsBinaryToDiff(t *testing.T) {
	h := newHost(t, githost.Config{})
	work, gitDir := t.TempDir(), filepath.Join(t.TempDir(), "job.git")
	newlines(t, work, "grown.txt", 2<<20)
	base, err := h.Snapshot(bg, gitDir, work)
	if err != nil {
		t.Fatal(err)
	}
	newlines(t, work, "grown.txt", 3<<20)
	newlines(t, work, "new.txt", 4<<20)
	write(t, work, "small.txt", "hello\n", 0o644)
	d := diff(t, h, gitDir, work, base)
	mustContain(t, "diff", d, "Binary files /dev/null and b/new.txt differ", "Binary files a/grown.txt and b/grown.txt differ", "+hello")
	if len(d) > 4<<10 {
		t.Errorf("diff of big files is %d bytes, want them named, not diffed", len(d))
	}
}

// TestGitMemoryBound: a git run that needs more memory than Memory
// fails, saying so (ErrBound, naming the setting), instead of taking
// the host's memory: here a text diff of 8 MiB of newlines, about 350
// MB, under a 64 MiB bound.
func TestGitMemoryBound(t *testing.T) {
	h := newHost(t, githost.Config{Memory: 64 << 20, BigFile: 1 << 30})
	work, gitDir := t.TempDir(), filepath.Join(t.TempDir(), "job.git")
	base, err := h.Snapshot(bg, gitDir, work)
	if err != nil {
		t.Fatal(err)
	}
	newlines(t, work, "lines.txt", 8<<20)
	err = h.Diff(bg, gitDir, work, base, new(bytes.Buffer))
	if !errors.Is(err, githost.ErrBound) || !strings.Contains(err.Error(), "AGENTBOX_GIT_MEMORY") {
		t.Fatalf("diff over the memory bound: %v; want ErrBound naming AGENTBOX_GIT_MEMORY", err)
	}
	// Under the bound, the same host diffs.
	newlines(t, work, "lines.txt", 64<<10)
	mustContain(t, "diff", diff(t, h, gitDir, work, base), "+++ b/lines.txt")
}
