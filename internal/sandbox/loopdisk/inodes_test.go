package loopdisk

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/sandbox"
)

// touchUntil creates empty files in dir until one fails or n are made;
// it returns how many were made and the error that stopped it.
func touchUntil(t *testing.T, dir string, n int) (int, error) {
	t.Helper()
	for i := range n {
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(i)), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
		if err != nil {
			return i, err
		}
		f.Close()
	}
	return n, nil
}

// countEntries is the number of entries under dir, dir itself not counted.
func countEntries(t *testing.T, dir string) int {
	t.Helper()
	n := -1
	filepath.WalkDir(dir, func(string, os.DirEntry, error) error { n++; return nil })
	return n
}

// TestDiskInodesBounded: a loop disk holds sandbox.InodeLimit(its size)
// entries, not mkfs's default of one per 16 KiB (65,536 on 1 GiB): past
// them, creating an empty file fails with ENOSPC while its bytes are
// nearly all free.
func TestDiskInodesBounded(t *testing.T) {
	if !Available() {
		t.Skip("skipping: loop disks need root, loop devices and mkfs.ext4")
	}
	const size = 1 << 30
	limit := int(sandbox.InodeLimit(size))
	state, ws := t.TempDir(), t.TempDir()
	tpl := &Templates{Dir: t.TempDir()}
	if err := tpl.Make(Disk{StateDir: state, WorkspaceDir: ws, Bytes: size, UID: 0, GID: 0}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Remove(state, "", false) })
	_, mnt := Paths(state)
	made, err := touchUntil(t, mnt, 4*limit)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("%d empty files made on a %d MiB disk, then %v; want ENOSPC past %d", made, size>>20, err, limit)
	}
	if made > limit {
		t.Errorf("%d empty files made on a %d MiB disk, over its bound of %d", made, size>>20, limit)
	}
	if made < limit*9/10 {
		t.Errorf("only %d of the %d entries a %d MiB quota allows", made, limit, size>>20)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(mnt, &st); err != nil || st.Bfree*uint64(st.Bsize) < size/2 {
		t.Errorf("the disk's bytes ran out (%d free, %v): the inodes did not stop it", st.Bfree*uint64(st.Bsize), err)
	}
}

// TestCopyBackStopsAtEntryBound: a disk with more inodes than the bound
// (made before disks had it: mkfs's default) and full of empty files is
// not copied to the host. The workspace keeps what it held, with a note
// saying why; the disk is removed; the host gains a handful of inodes,
// not the sandbox's 20,000.
func TestCopyBackStopsAtEntryBound(t *testing.T) {
	if !Available() {
		t.Skip("skipping: loop disks need root, loop devices and mkfs.ext4")
	}
	const size = 64 << 20
	state, ws := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ws, "before.txt"), []byte("before\n"), 0o644)
	img, mnt := Paths(state)
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Truncate(img, size)
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-N", "40000", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs: %v\n%s", err, out)
	}
	os.Mkdir(mnt, 0o700)
	if err := mountLoop(img, mnt, 0); err != nil {
		t.Fatal(err)
	}
	const flood = 20_000 // over the bound of a 64 MiB disk: 16,384 and slack
	if made, err := touchUntil(t, mnt, flood); err != nil {
		t.Fatalf("%d files made: %v", made, err)
	}
	err := Remove(state, ws, true)
	if err == nil || !strings.Contains(err.Error(), "entries") {
		t.Errorf("Remove of a disk of %d entries: %v; want an error naming the bound", flood, err)
	}
	if n := countEntries(t, ws); n > 10 {
		t.Errorf("the workspace holds %d entries after the copy back: the flood reached the host", n)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "before.txt")); err != nil || string(b) != "before\n" {
		t.Errorf("before.txt: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, copyErrors)); err != nil || !strings.Contains(string(b), "not copied back") {
		t.Errorf("the note: %q %v", b, err)
	}
	if Mounted(mnt) || Has(state) {
		t.Error("the disk is still mounted or its image still there")
	}
}
