// Package loopdisk gives a sandbox's workspace a disk quota the kernel
// enforces, on hosts whose filesystems have no project quotas: a loop disk,
// an ext4 filesystem of exactly the quota's size in a sparse file in the
// sandbox's private state dir, loop-mounted (nosuid, nodev, noatime) in that
// dir. Past the quota, writes to it fail with ENOSPC. The workspace's content
// is copied in before the sandbox starts and back out (holes and hard links
// kept, links never followed, set-ID bits dropped) when it is removed, so the
// workspace directory itself is an ordinary directory before and after. Each
// size's empty filesystem is made once with mkfs.ext4 and copied (sparse,
// ~4 MiB) for each sandbox. A disk has sandbox.InodeLimit(its size) inodes,
// not mkfs's one per 16 KiB: past them, creating a file fails with ENOSPC
// too, and the copy back makes no more on the host.
//
// Both the container tier (the mount is bind-mounted at /workspace) and the
// microvm tier (virtiofsd shares the mount) use it. The mount point sits in
// the sandbox's 0700 state dir: the host uid that owns the disk's content
// (the sandbox's, or the VM's agent uid 1000) cannot reach it from the host.
// Everything here runs as root.
package loopdisk

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/capped"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/units"
)

// Mode is the name of this way of enforcing a disk quota, as drivers'
// QuotaMode and agentbox doctor say it.
const Mode = "loop-disk"

const (
	diskImage = "disk.img"
	diskMount = "disk"
)

// Available reports whether this host can give workspaces loop disks: root,
// mkfs.ext4, cp, chmod, and loop devices.
func Available() bool {
	if os.Geteuid() != 0 {
		return false
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return false
	}
	for _, tool := range []string{"mkfs.ext4", "cp", "chmod", "chown", "find"} {
		if _, err := exec.LookPath(tool); err != nil {
			return false
		}
	}
	return true
}

// Paths are the image and the mount point of the loop disk of the sandbox
// whose state dir is stateDir.
func Paths(stateDir string) (img, mnt string) {
	return filepath.Join(stateDir, diskImage), filepath.Join(stateDir, diskMount)
}

// Has reports whether the sandbox whose state dir is stateDir was given a
// loop disk (and it has not been removed yet).
func Has(stateDir string) bool {
	img, _ := Paths(stateDir)
	_, err := os.Lstat(img)
	return stateDir != "" && err == nil
}

// Disk describes one sandbox's loop disk.
type Disk struct {
	// StateDir is the sandbox's private (0700) host directory: the image
	// and the mount point are made in it.
	StateDir string
	// WorkspaceDir is the directory whose content is copied in.
	WorkspaceDir string
	// Bytes is the disk's size: the quota.
	Bytes int64
	// UID and GID own the disk's content and its root.
	UID, GID int
}

// Templates makes and keeps the empty filesystems disks are copied from,
// one per size, in Dir. Each Templates has its own lock; processes sharing
// Dir (a server, agentbox exec, run) never clash either (see Get).
type Templates struct {
	Dir string
	mu  sync.Mutex
}

// Make gives the sandbox of disk a loop disk holding its workspace's
// current content, owned by disk.UID and disk.GID, mounted at the mount
// point Paths names. It leaves what it made for Remove on failure.
func (t *Templates) Make(disk Disk) error {
	img, mnt := Paths(disk.StateDir)
	tpl, err := t.Get(disk.Bytes)
	if err != nil {
		return err
	}
	if err := copySparse(tpl, img); err != nil {
		return fmt.Errorf("workspace disk: %w", err)
	}
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return fmt.Errorf("workspace disk: %w", err)
	}
	if err := mountLoop(img, mnt, 0); err != nil {
		return fmt.Errorf("workspace disk: %w", err)
	}
	os.Remove(filepath.Join(mnt, "lost+found"))
	if !empty(disk.WorkspaceDir) {
		if err := copyTree(disk.WorkspaceDir, mnt); err != nil {
			return fmt.Errorf("%w: the workspace does not fit its %s disk quota: %w", sandbox.ErrInvalidSpec, units.FormatSize(disk.Bytes), err)
		}
	}
	if err := ChownTree(mnt, disk.UID, disk.GID); err != nil {
		return err
	}
	return unix.Chmod(mnt, 0o755)
}

// empty reports whether dir is an empty directory.
func empty(dir string) bool {
	entries, err := os.ReadDir(dir)
	return err == nil && len(entries) == 0
}

// Get is an empty ext4 image of size bytes, made once per size.
func (t *Templates) Get(size int64) (string, error) {
	dir := t.Dir
	path := filepath.Join(dir, templateName(size))
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := os.Stat(path); err == nil {
		now := time.Now()
		_ = os.Chtimes(path, now, now) // used: the last to be pruned
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("workspace disk: %w", err)
	}
	pruneTemplates(dir, maxTemplates-1)
	// Every agentbox process on this data dir (a server, agentbox exec and
	// run) makes templates here, each under its own lock: a temporary file
	// of a name of its own, renamed into place whole, so that two of them
	// never run mkfs on the same file, nor move another's half-made one.
	removeStalePartials(dir)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".*.partial")
	if err != nil {
		return "", fmt.Errorf("workspace disk: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("workspace disk: %w", err)
	}
	if err := os.Truncate(tmp, size); err != nil {
		return "", fmt.Errorf("workspace disk: %w", err)
	}
	// No reserved blocks, no journal (the disk lives as long as its
	// sandbox; a crash loses only what a crash loses anyway), lazy init;
	// the sandbox's inode bound (mkfs rounds it up to whole inode table
	// blocks in each block group: a few per group).
	inodes := strconv.FormatInt(sandbox.InodeLimit(size), 10)
	if err := run("mkfs.ext4", "-q", "-F", "-m", "0", "-N", inodes, "-O", "^has_journal", "-E", "lazy_itable_init=1,nodiscard", tmp); err != nil {
		return "", fmt.Errorf("workspace disk: %w", err)
	}
	return path, os.Rename(tmp, path)
}

// templateName is the file name of the template of size bytes. It names
// the inode count: a template made before disks had the sandbox's inode
// bound (mkfs's default, four times as many) is never used again, and is
// pruned as the least recently used.
func templateName(size int64) string {
	return "ext4-" + strconv.FormatInt(size, 10) + "-" + strconv.FormatInt(sandbox.InodeLimit(size), 10) + "i.img"
}

// maxTemplates bounds the templates kept, one per disk size asked for: a
// client choosing a new limits.disk for every job would otherwise add one
// (~4 MiB) each time.
const maxTemplates = 16

// pruneTemplates removes the least recently used templates of dir beyond
// keep. A sandbox copying one still has it open, so removing it is safe.
func pruneTemplates(dir string, keep int) {
	paths, _ := filepath.Glob(filepath.Join(dir, "ext4-*.img"))
	if len(paths) <= keep {
		return
	}
	mtime := func(p string) time.Time {
		fi, err := os.Stat(p)
		if err != nil {
			return time.Time{}
		}
		return fi.ModTime()
	}
	slices.SortFunc(paths, func(a, b string) int { return mtime(b).Compare(mtime(a)) })
	for _, p := range paths[keep:] {
		os.Remove(p)
	}
}

// removeStalePartials removes the temporary templates that processes
// which died while making them left in dir (none takes an hour).
func removeStalePartials(dir string) {
	partials, _ := filepath.Glob(filepath.Join(dir, "*.partial"))
	for _, p := range partials {
		if fi, err := os.Lstat(p); err == nil && time.Since(fi.ModTime()) > time.Hour {
			os.Remove(p)
		}
	}
}

// copySparse copies the file src to a new file dst, only its data: the
// holes stay holes (a template is ~4 MiB of data in gigabytes of holes).
func copySparse(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = copyExtents(in, out, fi.Size())
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// copyExtents copies the data extents of in (size bytes) to the same
// offsets of out, and gives out the same size.
func copyExtents(in, out *os.File, size int64) error {
	for off := int64(0); off < size; {
		data, err := unix.Seek(int(in.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			return err
		}
		hole, err := unix.Seek(int(in.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		if _, err := out.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := in.Seek(data, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.CopyN(out, in, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return out.Truncate(size)
}

// Remove copies the content of the loop disk of the sandbox whose state
// dir is stateDir back to workspaceDir when copyBack is set (a scratch
// workspace is just removed), then unmounts and removes the disk, whatever
// the copy met: a disk left behind would hold up to its quota of the
// host's disk for ever, with no sandbox left to reap it. It mounts the
// image (read-only) again if it is no longer mounted, as after a reboot.
// Call it only once no sandbox process can write the disk. Removing what
// is gone already is no error.
func Remove(stateDir, workspaceDir string, copyBack bool) error {
	img, mnt := Paths(stateDir)
	var err error
	if copyBack && workspaceDir != "" && Has(stateDir) {
		if !Mounted(mnt) {
			err = mountLoop(img, mnt, unix.MS_RDONLY)
		}
		if err == nil {
			err = copyOut(img, mnt, workspaceDir)
		} else {
			err = fmt.Errorf("workspace disk %s cannot be read, its content is lost: %w", img, err)
		}
	}
	if Mounted(mnt) {
		if uerr := unix.Unmount(mnt, 0); uerr != nil {
			err = errors.Join(err, unix.Unmount(mnt, unix.MNT_DETACH))
		}
	}
	rerr := os.Remove(img)
	if errors.Is(rerr, os.ErrNotExist) {
		rerr = nil
	}
	os.Remove(mnt)
	return errors.Join(err, rerr)
}

// copyErrors is where, in a workspace, the copy back from its disk says
// what it could not copy (a path too long for the host, a full host disk).
const copyErrors = ".agentbox/copy-errors.txt"

// copyOut replaces workspaceDir with the content of the disk image img
// mounted at mnt, unless the disk holds more entries than the copy's bound
// (see overBound): then workspaceDir keeps what it held before the
// sandbox ran, with a note saying why in copyErrors.
func copyOut(img, mnt, workspaceDir string) error {
	if why := overBound(img, mnt); why != "" {
		err := fmt.Errorf("copy workspace back: %s; it was not copied back, the workspace holds what it held before the sandbox ran", why)
		return errors.Join(err, writeCopyErrors(workspaceDir, err.Error()+"\n"))
	}
	return replaceTree(mnt, workspaceDir)
}

// overBound says how the disk img, mounted at mnt, holds more entries than
// a copy back may make on the host, or "" when it does not. The bound is
// the sandbox's inode limit for the disk's size (its image's, which only
// the host can change), with the few more mkfs rounds up to
// (inodeSlack); a disk made with fewer inodes is within it whatever its
// content. Only a disk made before disks had the bound (mkfs's default
// of one inode per 16 KiB, still mounted after an upgrade) can pass it.
// The count is the filesystem's own (statfs), so it costs no walk.
func overBound(img, mnt string) string {
	fi, err := os.Stat(img)
	var st unix.Statfs_t
	if err != nil || unix.Statfs(mnt, &st) != nil {
		return "" // the copy itself will say what is wrong
	}
	limit := sandbox.InodeLimit(fi.Size())
	bound := min(int64(st.Files), limit+limit/inodeSlack)
	used := int64(st.Files - st.Ffree)
	if used <= bound {
		return ""
	}
	return fmt.Sprintf("its disk holds %d entries, over the %d a %s quota allows (one per %s, sandbox.InodeLimit)",
		used, bound, units.FormatSize(fi.Size()), units.FormatSize(sandbox.InodeBytes))
}

// inodeSlack: mkfs.ext4 -N rounds the inodes of each block group up to
// fill whole blocks of its inode table (at most 1/inodeSlack more in all).
const inodeSlack = 16

// replaceTree makes dst hold what src holds. What cp could not copy is
// left out, said in copyErrors and in the error; the rest is kept.
func replaceTree(src, dst string) error {
	next, old := dst+".agentbox-next", dst+".agentbox-old"
	os.RemoveAll(next)
	os.RemoveAll(old)
	if err := os.Mkdir(next, 0o755); err != nil {
		return fmt.Errorf("copy workspace back: %w", err)
	}
	cerr := copyTree(src, next)
	if cerr != nil {
		cerr = fmt.Errorf("copy workspace back: %w", cerr)
		cerr = errors.Join(cerr, writeCopyErrors(next, cerr.Error()+"\n"))
	}
	if err := os.Rename(dst, old); err != nil {
		os.RemoveAll(next)
		return errors.Join(cerr, fmt.Errorf("copy workspace back: %w", err))
	}
	if err := os.Rename(next, dst); err != nil {
		return errors.Join(cerr, fmt.Errorf("copy workspace back: %w", err))
	}
	return errors.Join(cerr, os.RemoveAll(old))
}

// writeCopyErrors puts text at copyErrors in the copied workspace dir. The
// copy holds what the sandbox made, links included: whatever is at
// .agentbox or at the note's name is removed first, and the note is
// created anew beneath a handle of dir, so no link the sandbox planted
// there can lead the write out of the workspace.
func writeCopyErrors(dir, text string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("copy errors note: %w", err)
	}
	defer root.Close()
	parent := filepath.Dir(copyErrors)
	if fi, err := root.Lstat(parent); err == nil && !fi.IsDir() {
		if err := root.Remove(parent); err != nil {
			return fmt.Errorf("copy errors note: %w", err)
		}
	}
	if err := root.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("copy errors note: %w", err)
	}
	if err := root.RemoveAll(copyErrors); err != nil {
		return fmt.Errorf("copy errors note: %w", err)
	}
	f, err := root.OpenFile(copyErrors, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("copy errors note: %w", err)
	}
	_, err = f.WriteString(text)
	return errors.Join(err, f.Close())
}

// copyTree copies the content of src into the directory dst with cp -a:
// links copied as links, never followed; hard links kept; holes kept;
// set-user and set-group-ID bits dropped, and device nodes removed,
// afterwards. A sandbox's agent cannot make a device node, but a guest
// kernel a microVM's root took over can, through virtio-fs: the disk's
// nodev mount makes it inert there, and a copy on the host's own file
// system would not be.
func copyTree(src, dst string) error {
	err := run("cp", "-a", "--sparse=always", "--no-target-directory", src, dst)
	// Also after a partial copy: no set-ID bit and no device reaches the host.
	err = errors.Join(err, run("chmod", "-R", "--", "ug-s", dst))
	return errors.Join(err, run("find", dst, "(", "-type", "b", "-o", "-type", "c", ")", "-delete"))
}

// mountLoop attaches img to a free loop device, with direct I/O (the disk's
// writes then skip a second copy in the page cache: a 1 GiB flushed write
// took 2.5 times as long without it) and autoclear (the device is freed
// when unmounted), and mounts its ext4 at mnt, nosuid and nodev.
func mountLoop(img, mnt string, flags uintptr) error {
	dev, err := attachLoop(img, flags&unix.MS_RDONLY != 0)
	if err != nil {
		return err
	}
	defer dev.Close() // the mount holds the device from here on
	err = unix.Mount(dev.Name(), mnt, "ext4", flags|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOATIME, "")
	if err != nil {
		return fmt.Errorf("mount %s: %w", dev.Name(), err)
	}
	return nil
}

// attachLoop binds img to a free loop device and returns it open.
func attachLoop(img string, ro bool) (*os.File, error) {
	mode := os.O_RDWR
	if ro {
		mode = os.O_RDONLY
	}
	backing, err := os.OpenFile(img, mode, 0)
	if err != nil {
		return nil, err
	}
	defer backing.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	for range 16 { // another process may take the same free device first
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("free loop device: %w", err)
		}
		dev, err := os.OpenFile("/dev/loop"+strconv.Itoa(n), mode, 0)
		if err != nil {
			return nil, err
		}
		cfg := unix.LoopConfig{Fd: uint32(backing.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR | unix.LO_FLAGS_DIRECT_IO
		if ro {
			cfg.Info.Flags |= unix.LO_FLAGS_READ_ONLY
		}
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		if errors.Is(err, unix.EINVAL) { // no direct I/O on this filesystem
			cfg.Info.Flags &^= unix.LO_FLAGS_DIRECT_IO
			err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		}
		if err == nil {
			return dev, nil
		}
		dev.Close()
		if !errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("loop device: %w", err)
		}
	}
	return nil, errors.New("loop device: every free one was taken")
}

// ChownTree gives dir and everything under it to uid:gid with chown -R
// -P -h: links changed themselves and never followed, the walk (fts) from
// each directory's descriptor, so its cost is linear in the entries
// whatever the depth. A walk that resolved each entry's path from dir
// again cost the square of the depth: 4.4 minutes of a host core, as
// root, for a chain of directories 8,000 deep that a sandbox made in
// seconds. Call it only while no sandbox process runs, so that the tree
// cannot change under it.
func ChownTree(dir string, uid, gid int) error {
	if err := run("chown", "-R", "-P", "-h", "--", strconv.Itoa(uid)+":"+strconv.Itoa(gid), dir); err != nil {
		return fmt.Errorf("workspace owner: %w", err)
	}
	return nil
}

// GiveBack gives a person's directory that a sandbox worked in back to
// uid:gid (ChownTree) and takes write permission from others on every
// entry (chmod -R o-w, which follows no link): the sandbox owned it all
// while it ran and may have left a directory or file, the top one
// included, that any local user could then write, for its owner to run.
// Changing the owner already clears set-uid and set-gid on files.
func GiveBack(dir string, uid, gid int) error {
	if err := ChownTree(dir, uid, gid); err != nil {
		return err
	}
	if err := run("chmod", "-R", "o-w", "--", dir); err != nil {
		return fmt.Errorf("workspace mode: %w", err)
	}
	return nil
}

// Mounted reports whether dir is a mount point.
func Mounted(dir string) bool {
	var a, b unix.Stat_t
	if unix.Lstat(dir, &a) != nil || unix.Lstat(filepath.Dir(dir), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}

// run runs a command and returns an error with the start of its output if
// it fails. Only the first 8 KiB of the output are kept: cp and chmod print
// a line for each entry they fail on, of a tree the sandbox wrote, so their
// output is as long as the sandbox likes.
func run(name string, args ...string) error {
	var out capped.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// Fill copies the content of dir into the mounted loop disk of the sandbox
// whose state dir is stateDir, and gives it to uid:gid: how a sandbox made
// with a scratch workspace takes a job's later (sandbox.Binder). The disk
// keeps its quota: content that does not fit fails with ErrInvalidSpec.
// Remove copies it back to dir. The disk must be as Make left a scratch
// one, empty: cp, run as root, writes through a link it finds where a
// file goes, so a disk a sandbox used before its bind could point the copy
// at any host file.
func Fill(stateDir, dir string, uid, gid int) error {
	_, mnt := Paths(stateDir)
	if !Mounted(mnt) {
		return fmt.Errorf("workspace disk of %s is not mounted", stateDir)
	}
	if !empty(mnt) {
		return fmt.Errorf("%w: the workspace disk of %s is not empty: only a sandbox that has run nothing takes a job's workspace", sandbox.ErrInvalidSpec, stateDir)
	}
	if !empty(dir) {
		if err := copyTree(dir, mnt); err != nil {
			return fmt.Errorf("%w: the workspace does not fit its disk quota: %w", sandbox.ErrInvalidSpec, err)
		}
	}
	return ChownTree(mnt, uid, gid)
}
