// Package diskusage measures what a sandbox's workspace holds on the host's
// disk, for the disk quota watchdogs of the tiers and hosts where the kernel
// cannot enforce the quota (docker without root; microvm on a directory a
// caller brought). The tree is the sandbox's: the walk follows no link and
// bounds its own cost.
package diskusage

import (
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// maxEntries bounds one measurement's walk (about 3 s); a workspace
// with more entries is over its quota for the watchdog.
const maxEntries = 1_000_000

// maxDepth bounds how deep the walk goes; a deeper tree is over its quota
// for the watchdog. Each level holds a directory open while the walk is
// beneath it, and no workspace of real work is 1,024 directories deep
// (the kernel's 4,096-byte paths reach ~2,000 with one-letter names).
const maxDepth = 1024

// entryBytes is the least an entry is charged: its inode and its name cost
// the host's disk even when it holds no data (500,000 empty files once
// hid from the watchdog in the time their walk took).
const entryBytes = 4096

// Tree is the disk space allocated to the files under dir (Measure).
func Tree(dir string) int64 { return Measure(dir).Bytes }

// Usage is what a tree holds: the disk space allocated to its files, each
// hard link counted once, and its entries (files, directories, links;
// each name of a hard-linked file counted), the inodes a copy of it may
// cost.
type Usage struct {
	Bytes, Entries int64
}

// Measure is what the tree under dir holds. The walk goes from each directory's open descriptor
// to its entries (openat, fstatat, never following a link), so its cost is
// linear in the entries whatever the depth: a walk that resolved each
// entry's path from dir again, one component at a time, cost the square
// of the depth, and a 3,000-deep chain of directories let a sandbox write
// 1.5 GiB past a 64 MiB quota while one measurement ran. A directory
// swapped for a link mid-walk leads nowhere else. Past maxEntries or
// maxDepth it answers more than any quota, of bytes and of entries.
func Measure(dir string) Usage {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Usage{}
	}
	w := walker{seen: map[uint64]bool{}}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil {
		w.add(&st)
	}
	w.dir(fd, 0)
	if w.over {
		return Usage{math.MaxInt64, math.MaxInt64}
	}
	return Usage{w.total, w.entries}
}

// walker adds up a tree's allocated space.
type walker struct {
	total, entries int64
	seen           map[uint64]bool // inodes with more than one link, counted
	over           bool            // past maxEntries or maxDepth
}

// add charges one entry.
func (w *walker) add(st *unix.Stat_t) {
	if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if w.seen[st.Ino] {
			return
		}
		w.seen[st.Ino] = true
	}
	w.total += max(st.Blocks*512, entryBytes)
}

// dir adds what the directory open as fd holds, depth levels below the
// top, and closes fd.
func (w *walker) dir(fd, depth int) {
	f := os.NewFile(uintptr(fd), "")
	defer f.Close()
	if depth >= maxDepth {
		w.over = true
		return
	}
	for !w.over {
		names, err := f.Readdirnames(1024)
		for _, name := range names {
			if w.entries++; w.entries > maxEntries {
				w.over = true
				return
			}
			w.entry(fd, name, depth)
		}
		if err != nil {
			return // io.EOF, or unreadable: what is left is not counted
		}
	}
}

// entry charges name in the directory fd, and walks it if a directory.
func (w *walker) entry(fd int, name string, depth int) {
	var st unix.Stat_t
	if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
		return // gone meanwhile
	}
	w.add(&st)
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return
	}
	sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		w.dir(sub, depth+1)
	}
}
