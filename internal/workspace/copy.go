package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"syscall"
)

// Copy makes the directory dir, which must not exist (ErrExists), a copy
// of the tree under src, within lim's bytes and entries (MaxRatio does not
// apply). It copies into a new directory beside dir, which becomes dir
// only once whole: on any error nothing is left behind. The tree may have
// been written by a sandbox, so it is read through src, which nothing
// leads out of, and no link is followed: every file and directory opened
// is checked to be the very entry its directory listed, not a link to
// another. Symlinks are copied as symlinks, their targets as they are
// (nothing on the host follows them); hard links become separate files.
// FIFOs, sockets and devices, and entries too deep for a path, are not
// copied: skipped names them, each with why (the first maxSkipNotes, then
// how many more). Modes lose set-uid, set-gid
// and sticky bits; times are kept.
func Copy(ctx context.Context, src *os.Root, dir string, lim Limits) (skipped []string, err error) {
	return copyTree(ctx, src, dir, lim, false)
}

// CopyLive is Copy of a tree a running sandbox may be changing while it is
// read, as a checkpoint reads one: an entry that is gone, or was replaced
// (by a link among others), between its directory's listing and its read
// is left out and named in skipped, not the copy's failure, as is one the
// server may not read. Nothing is ever read through a link: the race only
// costs the copy that entry.
func CopyLive(ctx context.Context, src *os.Root, dir string, lim Limits) (skipped []string, err error) {
	return copyTree(ctx, src, dir, lim, true)
}

func copyTree(ctx context.Context, src *os.Root, dir string, lim Limits, live bool) (skipped []string, err error) {
	err = build(dir, tempCopy, func(tmp string) error {
		root, err := os.OpenRoot(tmp)
		if err != nil {
			return err
		}
		defer root.Close()
		c := &copier{u: newUnpacker(ctx, root, lim), src: src, live: live}
		defer c.u.closeDir()
		if err := c.tree(); err != nil {
			return err
		}
		skipped = c.skipped.list()
		if err := c.u.finish(); err != nil {
			return err
		}
		return os.Chmod(tmp, 0o755)
	})
	if err != nil {
		return nil, fmt.Errorf("copy: %w", err)
	}
	return skipped, nil
}

// copier copies a tree through an unpacker, which makes every entry
// beneath the new tree's root and keeps the count against the limits.
type copier struct {
	u       *unpacker
	src     *os.Root
	skipped skipNotes
	live    bool // see CopyLive
}

// changed is what the copy makes of err, met reading the source entry p:
// in a live copy, an entry that changed under the walk is skipped (nil),
// and so is one the server may not read (a server that is not root, a
// file of the sandbox's uid with mode 0600).
func (c *copier) changed(p string, err error) error {
	switch {
	case !c.live:
		return err
	case changedMeanwhile(err):
		c.skip(p, "changed while it was copied ("+err.Error()+"), which this copy leaves out")
		return nil
	case errors.Is(err, fs.ErrPermission):
		c.skip(p, "not readable by the server, which this copy leaves out")
		return nil
	}
	return err
}

func (c *copier) skip(p, why string) { c.skipped.add(p, why) }

// maxSkipNotes bounds the entries a copy or a checkpoint names as left
// out: a sandbox makes FIFOs with 4 KiB paths for free, and each note
// would cost the server that much memory.
const maxSkipNotes = 100

// skipNotes names the entries left out, "path: why", the first
// maxSkipNotes of them, and counts the rest.
type skipNotes struct {
	notes []string
	more  int
}

func (n *skipNotes) add(p, why string) {
	if len(n.notes) == maxSkipNotes {
		n.more++
		return
	}
	n.notes = append(n.notes, p+": "+why)
}

// list is the notes, and one saying how many more entries were left out.
func (n *skipNotes) list() []string {
	if n.more == 0 {
		return n.notes
	}
	return append(n.notes, fmt.Sprintf("%d more entries left out, not named here", n.more))
}

// tree copies the source's root directory and everything under it.
func (c *copier) tree() error {
	fi, err := c.src.Lstat(".")
	if err != nil {
		return err
	}
	return c.dir(".", fi)
}

// dir copies the entries of the source directory p ("." for the root),
// whose Lstat is fi, and what is under them.
func (c *copier) dir(p string, fi fs.FileInfo) error {
	names, err := c.list(p, fi)
	if err != nil {
		return c.changed(p, err)
	}
	for _, name := range names {
		if err := c.entry(join(p, name)); err != nil {
			return err
		}
	}
	return nil
}

// list reads the names in the directory p, closing it before the walk goes
// deeper (a deep tree must not hold a descriptor per level). It reads no
// more names than entries are left.
func (c *copier) list(p string, fi fs.FileInfo) ([]string, error) {
	return listDir(c.src, p, fi, c.u.lim.maxEntries()-c.u.entries, c.u.lim.maxEntries())
}

// listDir reads the sorted names in the directory p of src, whose Lstat
// is fi, checking it is that very entry; more than left names is
// ErrTooLarge (a tree of more than max entries).
func listDir(src *os.Root, p string, fi fs.FileInfo, left, max int64) ([]string, error) {
	f, err := src.OpenFile(p, readFlags|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := sameEntry(f, fi); err != nil {
		return nil, fmt.Errorf("entry %q: %w", p, err)
	}
	names, err := f.Readdirnames(int(min(left+1, 1<<30)))
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("entry %q: %w", p, err)
	}
	if int64(len(names)) > left {
		return nil, fmt.Errorf("%w: more than %d entries", ErrTooLarge, max)
	}
	slices.Sort(names)
	return names, nil
}

// entry copies the entry at p: a directory and what is under it, a file,
// a symlink; anything else is skipped.
func (c *copier) entry(p string) error {
	if err := c.u.ctx.Err(); err != nil {
		return err
	}
	if len(p) > maxPathBytes {
		c.skip(p[:64]+"...", fmt.Sprintf("a path of %d bytes, over %d", len(p), maxPathBytes))
		return nil
	}
	fi, err := c.src.Lstat(p)
	if err != nil {
		return c.changed(p, fmt.Errorf("entry %q: %w", p, err))
	}
	switch m := fi.Mode(); {
	case m.IsDir():
		if err := c.u.mkdir(p, m, fi.ModTime()); err != nil {
			return err
		}
		return c.dir(p, fi)
	case m.IsRegular():
		return c.file(p, fi)
	case m&fs.ModeSymlink != 0:
		return c.symlink(p)
	default:
		c.skip(p, modeKind(m)+", which is not copied")
		return nil
	}
}

// file copies the regular file p, whose Lstat is fi.
func (c *copier) file(p string, fi fs.FileInfo) error {
	f, err := c.src.OpenFile(p, readFlags, 0)
	if err != nil {
		return c.changed(p, fmt.Errorf("entry %q: %w", p, err))
	}
	defer f.Close()
	if err := sameEntry(f, fi); err != nil {
		return c.changed(p, fmt.Errorf("entry %q: %w", p, err))
	}
	return c.u.writeFile(p, fi.Mode(), fi.ModTime(), f)
}

// symlink copies the symlink p with its target as it is.
func (c *copier) symlink(p string) error {
	target, err := c.src.Readlink(p)
	if err != nil {
		return c.changed(p, fmt.Errorf("entry %q: %w", p, err))
	}
	if target == "" || len(target) > maxTargetBytes {
		c.skip(p, fmt.Sprintf("a symlink with a target of %d bytes", len(target)))
		return nil
	}
	return c.u.link(p, target)
}
