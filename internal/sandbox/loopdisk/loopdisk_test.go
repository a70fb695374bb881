package loopdisk

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A command the host runs over a tree the sandbox wrote (cp, chmod) can
// be made to print without end: one line per entry, each as long as a
// path. Its output must not be kept whole in the host's memory.
func TestRunKeepsBoundedOutput(t *testing.T) {
	err := run("sh", "-c", "head -c 20000000 /dev/zero | tr '\\0' x >&2; exit 1")
	if err == nil {
		t.Fatal("a failing command reported no error")
	}
	if n := len(err.Error()); n > 16<<10 {
		t.Errorf("the error of a command that printed 20 MB holds %d bytes of it", n)
	}
	if !strings.Contains(err.Error(), "exit status 1") {
		t.Errorf("error %q does not say how the command ended", err.Error()[:min(len(err.Error()), 200)])
	}
}

// Every agentbox process on a data dir (a server, agentbox exec, run)
// shares its disk templates; each process has its own lock. Templates made
// at once by several of them must each come out whole.
func TestDiskTemplatesMadeAtOnceByManyProcesses(t *testing.T) {
	for _, tool := range []string{"mkfs.ext4", "e2fsck"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: no %s", tool)
		}
	}
	dir := t.TempDir()
	for round := range 4 {
		size := int64(64<<20 + round<<20)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			tpl := &Templates{Dir: filepath.Join(dir, ".disks")} // another process: another lock
			wg.Go(func() {
				if _, err := tpl.Get(size); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("size %d: %v", size, err)
		}
		path := filepath.Join(dir, ".disks", templateName(size))
		if out, err := exec.Command("e2fsck", "-fn", path).CombinedOutput(); err != nil {
			t.Errorf("template %s is damaged: %v\n%s", path, err, out)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".disks", "*.partial"))
	if len(left) > 0 {
		t.Errorf("partial templates left: %v", left)
	}
}

// TestCopyErrorsNoteFollowsNoLink: the copied workspace may hold links the
// sandbox made at the note's name or at its directory's; the note replaces
// them and never writes through them.
func TestCopyErrorsNoteFollowsNoLink(t *testing.T) {
	for name, plant := range map[string]func(ws, outside string) error{
		"link at the note": func(ws, outside string) error {
			if err := os.Mkdir(filepath.Join(ws, ".agentbox"), 0o755); err != nil {
				return err
			}
			return os.Symlink(filepath.Join(outside, "victim"), filepath.Join(ws, copyErrors))
		},
		"link at its directory": func(ws, outside string) error {
			return os.Symlink(outside, filepath.Join(ws, ".agentbox"))
		},
		"directory at the note": func(ws, outside string) error {
			return os.MkdirAll(filepath.Join(ws, copyErrors, "x"), 0o755)
		},
	} {
		t.Run(name, func(t *testing.T) {
			ws, outside := t.TempDir(), t.TempDir()
			victim := filepath.Join(outside, "victim")
			if err := os.WriteFile(victim, []byte("kept"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := plant(ws, outside); err != nil {
				t.Fatal(err)
			}
			if err := writeCopyErrors(ws, "note\n"); err != nil {
				t.Fatalf("writeCopyErrors: %v", err)
			}
			if b, err := os.ReadFile(victim); err != nil || string(b) != "kept" {
				t.Errorf("the file outside holds %q (%v)", b, err)
			}
			if _, err := os.Stat(filepath.Join(outside, "copy-errors.txt")); err == nil {
				t.Error("the note was written outside the workspace")
			}
			fi, err := os.Lstat(filepath.Join(ws, copyErrors))
			b, _ := os.ReadFile(filepath.Join(ws, copyErrors))
			if err != nil || !fi.Mode().IsRegular() || string(b) != "note\n" {
				t.Errorf("the note: %v %v %q", fi, err, b)
			}
		})
	}
}

func TestCopySparseKeepsHoles(t *testing.T) {
	dir := t.TempDir()
	src, dst := dir+"/src", dir+"/dst"
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("head"), 0)
	f.WriteAt([]byte("middle"), 32<<20)
	f.Truncate(64 << 20)
	f.Close()
	if err := copySparse(src, dst); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(src)
	b, _ := os.ReadFile(dst)
	if !bytes.Equal(a, b) {
		t.Fatal("copy differs")
	}
	var st syscall.Stat_t
	syscall.Stat(dst, &st)
	if st.Size != 64<<20 || st.Blocks*512 > 1<<20 {
		t.Errorf("copy is %d bytes with %d allocated, want 64 MiB with its holes kept", st.Size, st.Blocks*512)
	}
}

func TestTemplatesArePruned(t *testing.T) {
	dir := t.TempDir()
	for i := range 20 {
		p := filepath.Join(dir, fmt.Sprintf("ext4-%d.img", i))
		os.WriteFile(p, nil, 0o600)
		at := time.Now().Add(time.Duration(i-20) * time.Minute)
		os.Chtimes(p, at, at)
	}
	pruneTemplates(dir, maxTemplates-1)
	left, _ := filepath.Glob(filepath.Join(dir, "ext4-*.img"))
	if len(left) != maxTemplates-1 {
		t.Fatalf("%d templates left, want %d", len(left), maxTemplates-1)
	}
	if _, err := os.Stat(filepath.Join(dir, "ext4-19.img")); err != nil {
		t.Error("the most recently used template was pruned")
	}
	if _, err := os.Stat(filepath.Join(dir, "ext4-0.img")); err == nil {
		t.Error("the least recently used template was kept")
	}
}

// TestMakeAndRemove: a disk holds the workspace's content, owned by the
// sandbox's uid; past its size a write fails with ENOSPC; Remove copies
// the content back (a link as a link), unmounts and removes the disk, and
// a second Remove finds nothing to do.
func TestMakeAndRemove(t *testing.T) {
	if !Available() {
		t.Skip("skipping: loop disks need root, loop devices and mkfs.ext4")
	}
	state, ws := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(ws, "before.txt"), []byte("before\n"), 0o644)
	os.Symlink("/etc/passwd", filepath.Join(ws, "link"))
	tpl := &Templates{Dir: t.TempDir()}
	if _, err := tpl.Get(32 << 20); err != nil { // made once; timed below without it
		t.Fatal(err)
	}
	begin := time.Now()
	if err := tpl.Make(Disk{StateDir: state, WorkspaceDir: ws, Bytes: 32 << 20, UID: 1000, GID: 1000}); err != nil {
		t.Fatal(err)
	}
	t.Logf("make (copy template, mount, copy in) %v", time.Since(begin).Round(time.Microsecond))
	_, mnt := Paths(state)
	var st syscall.Stat_t
	if err := syscall.Lstat(filepath.Join(mnt, "before.txt"), &st); err != nil || st.Uid != 1000 {
		t.Fatalf("the disk's copy of before.txt: uid %d, %v; want 1000", st.Uid, err)
	}
	err := os.WriteFile(filepath.Join(mnt, "big"), make([]byte, 40<<20), 0o644)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("40 MiB written to a 32 MiB disk: %v, want ENOSPC", err)
	}
	os.Remove(filepath.Join(mnt, "big"))
	os.WriteFile(filepath.Join(mnt, "inside.txt"), []byte("inside\n"), 0o644)
	begin = time.Now()
	if err := Remove(state, ws, true); err != nil {
		t.Fatal(err)
	}
	t.Logf("remove (copy back, unmount) %v", time.Since(begin).Round(time.Microsecond))
	if b, err := os.ReadFile(filepath.Join(ws, "inside.txt")); err != nil || string(b) != "inside\n" {
		t.Errorf("inside.txt copied back: %q %v", b, err)
	}
	if target, err := os.Readlink(filepath.Join(ws, "link")); err != nil || target != "/etc/passwd" {
		t.Errorf("link copied back: %q %v", target, err)
	}
	if Mounted(mnt) || Has(state) {
		t.Error("the disk is still mounted or its image still there")
	}
	if err := Remove(state, ws, true); err != nil {
		t.Errorf("a second Remove: %v", err)
	}
}

// TestCopyTreeDropsDevicesAndSetID: what a sandbox left (a device node a
// guest kernel's root could make through virtio-fs, a set-uid file) is
// inert once copied to the host: no device node, no set-ID bit; the rest
// is copied, links as links.
func TestCopyTreeDropsDevicesAndSetID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a device node needs root")
	}
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "dst")
	os.Mkdir(dst, 0o755)
	os.MkdirAll(src+"/d", 0o755)
	if err := syscall.Mknod(src+"/d/disk", syscall.S_IFBLK|0o666, int(unix.Mkdev(7, 0))); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(src+"/null", syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(src+"/suid", []byte("x"), 0o755)
	os.Chmod(src+"/suid", 0o4755)
	os.WriteFile(src+"/keep.txt", []byte("kept\n"), 0o644)
	os.Symlink("/etc/shadow", src+"/link")
	if err := copyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{"d/disk", "null"} {
		if _, err := os.Lstat(filepath.Join(dst, dev)); err == nil {
			t.Errorf("device node %s copied to the host", dev)
		}
	}
	if fi, err := os.Stat(dst + "/suid"); err != nil || fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("suid: %v %v", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(dst + "/keep.txt"); string(b) != "kept\n" {
		t.Errorf("keep.txt %q", b)
	}
	if target, err := os.Readlink(dst + "/link"); err != nil || target != "/etc/shadow" {
		t.Errorf("link %q %v", target, err)
	}
}

// TestChownTreeDeepAndLinks: a chain of directories thousands deep (a
// sandbox makes one in seconds) is handed over in linear time; a link is
// changed itself, its target never.
func TestChownTreeDeepAndLinks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	dir, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "target")
	os.WriteFile(target, nil, 0o644)
	os.Symlink(target, filepath.Join(dir, "link"))
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	const depth = 3000
	for range depth {
		unix.Mkdirat(fd, "a", 0o755)
		next, err := unix.Openat(fd, "a", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
	begin := time.Now()
	if err := ChownTree(dir, 4242, 4243); err != nil {
		t.Fatal(err)
	}
	took := time.Since(begin)
	t.Logf("a %d-deep chain handed over in %v", depth, took)
	// By paths from the top, 2,000 levels took 14.7 s here (the square
	// of the depth); by descriptors, ~0.1 s for these 3,000.
	if took > 5*time.Second {
		t.Errorf("ChownTree of a %d-deep chain took %v: not linear in the depth", depth, took)
	}
	var st unix.Stat_t
	if unix.Lstat(filepath.Join(dir, "link"), &st); st.Uid != 4242 {
		t.Errorf("the link is owned by %d", st.Uid)
	}
	if unix.Stat(target, &st); st.Uid != 0 {
		t.Errorf("the link's target was changed: owned by %d", st.Uid)
	}
	if unix.Lstat(filepath.Join(dir, "a", "a", "a"), &st); st.Uid != 4242 || st.Gid != 4243 {
		t.Errorf("a/a/a owned by %d:%d", st.Uid, st.Gid)
	}
}

// TestGiveBackLeavesNothingWritableByOthers: the sandbox owns a person's
// directory while it runs (in place) and may chmod 0777 it, .git/hooks or
// a file; handed back, that would let any local user write code its owner
// (root, for --in-place) then runs. Nothing is left writable by others;
// what a link points to is never changed.
func TestGiveBackLeavesNothingWritableByOthers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	dir, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "target")
	os.WriteFile(target, nil, 0o666)
	os.Chmod(target, 0o666)
	os.Symlink(target, filepath.Join(dir, "link"))
	os.MkdirAll(filepath.Join(dir, ".git", "hooks"), 0o755)
	os.WriteFile(filepath.Join(dir, "f"), nil, 0o644)
	for path, mode := range map[string]os.FileMode{dir: 0o777, filepath.Join(dir, ".git", "hooks"): 0o777 | os.ModeSticky, filepath.Join(dir, "f"): 0o666} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := GiveBack(dir, 4242, 4243); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o775, filepath.Join(dir, ".git", "hooks"): 0o775 | os.ModeSticky, filepath.Join(dir, "f"): 0o664} {
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode().Perm()|fi.Mode()&os.ModeSticky != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 4242 || st.Gid != 4243 {
			t.Errorf("%s owned by %d:%d", path, st.Uid, st.Gid)
		}
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o666 {
		t.Errorf("the link's target was changed: %v", fi.Mode())
	}
}

// TestFillRefusesUsedDisk: Fill copies as root onto the disk, where cp
// writes through a link it finds at a file's place; a disk that holds
// anything (a sandbox ran before its bind and left a link to a host file)
// is refused, and the host file is left alone.
func TestFillRefusesUsedDisk(t *testing.T) {
	if !Available() {
		t.Skip("skipping: loop disks need root, loop devices and mkfs.ext4")
	}
	state, scratch, ws := t.TempDir(), t.TempDir(), t.TempDir()
	outside := filepath.Join(t.TempDir(), "host-file")
	os.WriteFile(outside, []byte("host\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "f"), []byte("job\n"), 0o644)
	tpl := &Templates{Dir: t.TempDir()}
	if err := tpl.Make(Disk{StateDir: state, WorkspaceDir: scratch, Bytes: 32 << 20, UID: 1000, GID: 1000}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Remove(state, scratch, false) })
	_, mnt := Paths(state)
	if err := os.Symlink(outside, filepath.Join(mnt, "f")); err != nil {
		t.Fatal(err)
	}
	if err := Fill(state, ws, 1000, 1000); err == nil {
		t.Error("Fill of a disk holding a link succeeded")
	}
	if b, _ := os.ReadFile(outside); string(b) != "host\n" {
		t.Errorf("the host file behind the planted link holds %q", b)
	}
}
