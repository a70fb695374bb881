package docker

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// A loop disk is a kernel-enforced quota for a workspace agentbox owns (a
// job's), on hosts whose filesystems have no project quotas: an ext4
// filesystem of exactly the quota's size, in a sparse file in the
// sandbox's private state dir, loop-mounted (nosuid, nodev) and mounted at
// /workspace. Past the quota, writes fail with ENOSPC inside. The
// workspace's content is copied in before the sandbox starts and back out
// (holes and hard links kept, links never followed) when it is destroyed,
// so the workspace directory itself is an ordinary directory before and
// after. Each size's empty filesystem is made once with mkfs.ext4 and
// copied (sparse, ~4 MiB) for each sandbox.

const (
	diskImage = "disk.img"
	diskMount = "disk"
)

// loopDisks reports whether this host can give workspaces loop disks: root,
// mkfs.ext4, mount, cp, and loop devices.
func loopDisks() bool {
	if !isRoot() {
		return false
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return false
	}
	for _, tool := range []string{"mkfs.ext4", "mount", "umount", "cp"} {
		if _, err := exec.LookPath(tool); err != nil {
			return false
		}
	}
	return true
}

// diskPaths are the image and the mount point of a sandbox's loop disk.
func diskPaths(stateDir string) (img, mnt string) {
	return filepath.Join(stateDir, diskImage), filepath.Join(stateDir, diskMount)
}

// hasDisk reports whether the sandbox of h was given a loop disk.
func hasDisk(h sandbox.Handle) bool {
	img, _ := diskPaths(h.StateDir)
	_, err := os.Lstat(img)
	return h.StateDir != "" && err == nil
}

// makeDisk gives the sandbox a loop disk of h.DiskBytes holding the
// workspace's current content, owned by the sandbox's uid.
func (d *Driver) makeDisk(h sandbox.Handle) error {
	img, mnt := diskPaths(h.StateDir)
	tpl, err := d.diskTemplate(h.DiskBytes)
	if err != nil {
		return err
	}
	if err := run("cp", "--sparse=always", tpl, img); err != nil {
		return fmt.Errorf("workspace disk: %w", err)
	}
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return fmt.Errorf("workspace disk: %w", err)
	}
	if err := run("mount", "-o", "loop,nosuid,nodev,noatime", img, mnt); err != nil {
		return fmt.Errorf("workspace disk: %w", err)
	}
	os.Remove(filepath.Join(mnt, "lost+found"))
	if !empty(h.WorkspaceDir) {
		if err := copyTree(h.WorkspaceDir, mnt); err != nil {
			return fmt.Errorf("%w: the workspace does not fit its %s disk quota: %w", sandbox.ErrInvalidSpec, config.SizeText(h.DiskBytes), err)
		}
	}
	if err := chownTree(mnt, owner{h.UID, h.UID}); err != nil {
		return err
	}
	return unix.Chmod(mnt, 0o755)
}

// diskTemplate is an empty ext4 image of size bytes, made once per size.
func (d *Driver) diskTemplate(size int64) (string, error) {
	dir := filepath.Join(d.cfg.StateDir, ".disks")
	path := filepath.Join(dir, "ext4-"+strconv.FormatInt(size, 10)+".img")
	d.diskMu.Lock()
	defer d.diskMu.Unlock()
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("workspace disk: %w", err)
	}
	tmp := path + ".partial"
	os.Remove(tmp)
	if err := os.WriteFile(tmp, nil, 0o600); err != nil {
		return "", fmt.Errorf("workspace disk: %w", err)
	}
	defer os.Remove(tmp)
	if err := os.Truncate(tmp, size); err != nil {
		return "", fmt.Errorf("workspace disk: %w", err)
	}
	// No reserved blocks, no journal (the disk lives as long as its
	// sandbox; a crash loses only what a crash loses anyway), lazy init.
	if err := run("mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-E", "lazy_itable_init=1,nodiscard", tmp); err != nil {
		return "", fmt.Errorf("workspace disk: %w", err)
	}
	return path, os.Rename(tmp, path)
}

// syncDisk copies the loop disk's content back to the workspace (a caller's
// one; a scratch workspace is just removed), then unmounts and removes the
// disk. The copy replaces the workspace's old content only once whole.
func syncDisk(h sandbox.Handle) error {
	img, mnt := diskPaths(h.StateDir)
	if !mounted(mnt) {
		if err := run("mount", "-o", "loop,nosuid,nodev,noatime,ro", img, mnt); err != nil {
			return fmt.Errorf("workspace disk: %w", err)
		}
	}
	var err error
	if !h.OwnsWorkspace && h.WorkspaceDir != "" {
		err = replaceTree(mnt, h.WorkspaceDir)
	}
	if uerr := unix.Unmount(mnt, 0); uerr != nil && !errors.Is(uerr, unix.EINVAL) {
		return errors.Join(err, fmt.Errorf("unmount workspace disk: %w", uerr))
	}
	if err != nil {
		return err
	}
	return errors.Join(os.Remove(mnt), os.Remove(img))
}

// replaceTree makes dst hold exactly what src holds.
func replaceTree(src, dst string) error {
	next, old := dst+".agentbox-next", dst+".agentbox-old"
	os.RemoveAll(next)
	os.RemoveAll(old)
	if err := os.Mkdir(next, 0o755); err != nil {
		return fmt.Errorf("copy workspace back: %w", err)
	}
	if err := copyTree(src, next); err != nil {
		os.RemoveAll(next)
		return fmt.Errorf("copy workspace back: %w", err)
	}
	if err := os.Rename(dst, old); err != nil {
		return fmt.Errorf("copy workspace back: %w", err)
	}
	if err := os.Rename(next, dst); err != nil {
		return fmt.Errorf("copy workspace back: %w", err)
	}
	return os.RemoveAll(old)
}

// copyTree copies the content of src into the directory dst with cp -a:
// links copied as links, never followed; hard links kept; holes kept;
// set-user and set-group-ID bits dropped afterwards.
func copyTree(src, dst string) error {
	if err := run("cp", "-a", "--sparse=always", "--no-target-directory", src, dst); err != nil {
		return err
	}
	return run("chmod", "-R", "--", "ug-s", dst)
}

// mounted reports whether dir is a mount point.
func mounted(dir string) bool {
	var a, b unix.Stat_t
	if unix.Lstat(dir, &a) != nil || unix.Lstat(filepath.Dir(dir), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
