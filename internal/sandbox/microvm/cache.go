package microvm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/guest/vminit"
)

// The cache holds a kernel, then an initramfs per guest binary (87 MB)
// and a root file system per image (3 GB), each made once. A new binary
// or image adds one, so what has not been used for cacheMaxAge is
// removed when a new one is made: a file is touched each time it is
// used, and one a running VM has open stays readable once unlinked.

// cacheMaxAge is how long an unused initramfs or root file system is kept.
const cacheMaxAge = 24 * time.Hour

// touch marks a cached file used.
func touch(file string) {
	now := time.Now()
	_ = os.Chtimes(file, now, now)
}

// pruneCache removes the files of cacheDir matching pattern, other than
// keep, unused for cacheMaxAge, and the temporary directories of builds
// that were cut short (by a kill) as long ago.
func pruneCache(cacheDir, pattern, keep string) {
	old, _ := filepath.Glob(filepath.Join(cacheDir, pattern))
	partial, _ := filepath.Glob(filepath.Join(cacheDir, ".rootfs-*"))
	for _, f := range append(old, partial...) {
		fi, err := os.Lstat(f)
		if f == keep || err != nil || time.Since(fi.ModTime()) < cacheMaxAge {
			continue
		}
		_ = os.RemoveAll(f)
	}
}

// containerFiles gives the exported tree of an image what a container's
// runtime writes into a container and `docker export` leaves empty:
// /etc/hosts naming localhost (without it "localhost" does not resolve)
// and /etc/hostname, where the image has none or an empty one. The tree
// is the image's, so it is opened as an os.Root: a link in it (an /etc
// pointing out of it) is never followed onto the host.
func containerFiles(tree string) error {
	root, err := os.OpenRoot(tree)
	if err != nil {
		return fmt.Errorf("rootfs: %w", err)
	}
	defer root.Close()
	for _, f := range []struct{ name, content string }{{"etc/hosts", vminit.HostsFile}, {"etc/hostname", vminit.HostName + "\n"}} {
		if err := fillIfEmpty(root, f.name, f.content); err != nil {
			return fmt.Errorf("rootfs: %w", err)
		}
	}
	return nil
}

// fillIfEmpty writes content to name in root if it is missing or an empty
// regular file; an image's own content, or anything but a regular file,
// is left alone (a link is never followed).
func fillIfEmpty(root *os.Root, name, content string) error {
	fi, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, err := root.Stat(path.Dir(name)); err != nil {
			return nil // no /etc, or one leading out of the tree
		}
	case err != nil, !fi.Mode().IsRegular(), fi.Size() > 0:
		// A path through a link out of the tree (os.Root refuses it),
		// the image's own content, or not a regular file: left alone.
		return nil
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	return errors.Join(err, f.Close())
}

// rootfsName is the cached root file system of the image whose ID is id;
// the version in the name changes when what BuildRootfs puts in does.
func rootfsName(cacheDir, id string) string {
	return filepath.Join(cacheDir, "rootfs-v2-"+strings.TrimPrefix(id, "sha256:")[:16]+".ext4")
}
