// Package diskusage measures what a sandbox's workspace holds on the host's
// disk, for the disk quota watchdogs of the tiers and hosts where the kernel
// cannot enforce the quota (docker without root; microvm on a directory a
// caller brought). The tree is the sandbox's: the walk follows no link and
// bounds its own cost.
package diskusage

import (
	"io/fs"
	"math"
	"os"
	"syscall"
)

// maxEntries bounds one measurement's walk (about 3 s); a workspace
// with more entries is over its quota for the watchdog.
const maxEntries = 1_000_000

// entryBytes is the least an entry is charged: its inode and its name cost
// the host's disk even when it holds no data (500,000 empty files once
// hid from the watchdog in the time their walk took).
const entryBytes = 4096

// Tree is the disk space allocated to the files under dir, each hard
// link counted once, walked through an os.Root so that a directory swapped
// for a link mid-walk leads nowhere else. Past maxEntries it answers
// more than any quota.
func Tree(dir string) int64 {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0
	}
	defer root.Close()
	var total, entries int64
	seen := map[uint64]bool{}
	_ = fs.WalkDir(root.FS(), ".", func(_ string, d fs.DirEntry, err error) error {
		if entries++; entries > maxEntries {
			total = math.MaxInt64
			return fs.SkipAll
		}
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if st.Nlink > 1 && !d.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		total += max(st.Blocks*512, entryBytes)
		return nil
	})
	return total
}
