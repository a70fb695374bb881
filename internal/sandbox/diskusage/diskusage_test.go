package diskusage

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// chain makes depth nested directories "a" under dir, by descriptor (a
// path that long could not be named), with a file of size bytes at the
// bottom, and returns how long the chain took to make.
func chain(t *testing.T, dir string, depth int, size int64) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range depth {
		if err := unix.Mkdirat(fd, "a", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, "a", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, "data", unix.O_WRONLY|unix.O_CREAT, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(f)
	if _, err := unix.Write(f, make([]byte, size)); err != nil {
		t.Fatal(err)
	}
}

func TestTree(t *testing.T) {
	t.Run("files, hard links once, links not followed", func(t *testing.T) {
		dir, outside := t.TempDir(), t.TempDir()
		os.WriteFile(filepath.Join(outside, "big"), make([]byte, 8<<20), 0o644)
		os.WriteFile(filepath.Join(dir, "f"), make([]byte, 1<<20), 0o644)
		os.Link(filepath.Join(dir, "f"), filepath.Join(dir, "g"))
		os.Symlink(outside, filepath.Join(dir, "out"))
		got := Tree(dir)
		if got < 1<<20 || got > 1<<20+64<<10 {
			t.Errorf("Tree = %d, want ~1 MiB (the hard link once, the link to 8 MiB not followed)", got)
		}
	})
	t.Run("deep chain, linear", func(t *testing.T) {
		dir := t.TempDir()
		chain(t, dir, maxDepth-2, 4<<20)
		begin := time.Now()
		got := Tree(dir)
		took := time.Since(begin)
		if got < 4<<20 || got == math.MaxInt64 {
			t.Errorf("Tree of a %d-deep chain = %d, want its 4 MiB file and its directories", maxDepth-2, got)
		}
		t.Logf("a %d-deep chain walked in %v", maxDepth-2, took)
		// The walk by paths from the top took 3.2 s here for these 1,022
		// levels (the square of the depth); by descriptors, ~10 ms.
		if took > time.Second {
			t.Errorf("Tree of a %d-deep chain took %v: the walk is not linear in the depth", maxDepth-2, took)
		}
	})
	t.Run("deeper than maxDepth is over any quota", func(t *testing.T) {
		dir := t.TempDir()
		chain(t, dir, 3*maxDepth, 0)
		begin := time.Now()
		if got := Tree(dir); got != math.MaxInt64 {
			t.Errorf("Tree of a %d-deep chain = %d, want MaxInt64", 3*maxDepth, got)
		}
		if took := time.Since(begin); took > time.Second {
			t.Errorf("took %v", took)
		}
	})
	t.Run("a missing or linked dir counts nothing", func(t *testing.T) {
		dir := t.TempDir()
		os.Symlink(t.TempDir(), filepath.Join(dir, "l"))
		if got := Tree(filepath.Join(dir, "l")); got != 0 {
			t.Errorf("Tree through a link = %d", got)
		}
		if got := Tree(filepath.Join(dir, strings.Repeat("x", 10))); got != 0 {
			t.Errorf("Tree of a missing dir = %d", got)
		}
	})
}

// TestMeasureCountsEntries: each name is an entry, a hard link's too,
// and entries past the quota's inode bound are over it though they hold
// no data.
func TestMeasureCountsEntries(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	os.WriteFile(filepath.Join(dir, "d", "f"), nil, 0o644)
	os.Link(filepath.Join(dir, "d", "f"), filepath.Join(dir, "hard"))
	os.Symlink("d/f", filepath.Join(dir, "link"))
	if u := Measure(dir); u.Entries != 4 {
		t.Errorf("Measure counted %d entries, want 4", u.Entries)
	}
	for _, tt := range []struct {
		used Usage
		over string
	}{
		{Usage{Bytes: 1 << 20, Entries: 16_384}, ""},
		{Usage{Bytes: 65 << 20, Entries: 10}, "over its 64MiB quota"},
		{Usage{Bytes: 1 << 20, Entries: 16_385}, "16385 files, directories and links, over the 16384"},
	} {
		err := OverQuota(tt.used, 64<<20)
		if tt.over == "" && err != nil || tt.over != "" && (err == nil || !strings.Contains(err.Error(), tt.over)) {
			t.Errorf("OverQuota(%+v) = %v, want %q", tt.used, err, tt.over)
		}
	}
}
