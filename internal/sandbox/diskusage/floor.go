package diskusage

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/units"
)

// Free is what is left for unprivileged users on a filesystem: bytes and
// inodes. Inodes is -1 on a filesystem with no fixed inode count (btrfs
// reports none).
type Free struct {
	Bytes, Inodes int64
}

// FreeOf is what is left on the filesystem holding dir.
func FreeOf(dir string) (Free, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Free{}, fmt.Errorf("free disk space: %w", err)
	}
	f := Free{Bytes: int64(st.Bavail) * st.Bsize, Inodes: int64(st.Ffree)}
	if st.Files == 0 {
		f.Inodes = -1
	}
	return f, nil
}

// Floor is the free space and free inodes of a filesystem below which no
// new sandbox starts (AGENTBOX_MIN_FREE_DISK, AGENTBOX_MIN_FREE_INODES);
// zero turns either off. A sandbox's quota bounds its bytes and inodes,
// not those of all sandboxes together with what the host keeps (ended
// jobs' workspaces, for AGENTBOX_RETENTION).
type Floor struct {
	Bytes, Inodes int64
}

// Below says how the filesystem holding dir is under f ("1.2GiB free on
// the filesystem of DIR, under the 2GiB floor (AGENTBOX_MIN_FREE_DISK)"),
// or "" when it is not.
func (f Floor) Below(dir string) (string, error) {
	if f.Bytes <= 0 && f.Inodes <= 0 {
		return "", nil
	}
	free, err := FreeOf(dir)
	if err != nil {
		return "", err
	}
	if f.Bytes > 0 && free.Bytes < f.Bytes {
		return fmt.Sprintf("%s free on the filesystem of %s, under the %s floor (AGENTBOX_MIN_FREE_DISK)",
			units.FormatSize(free.Bytes), dir, units.FormatSize(f.Bytes)), nil
	}
	if f.Inodes > 0 && free.Inodes >= 0 && free.Inodes < f.Inodes {
		return fmt.Sprintf("%d inodes free on the filesystem of %s, under the %d floor (AGENTBOX_MIN_FREE_INODES)",
			free.Inodes, dir, f.Inodes), nil
	}
	return "", nil
}

// Check refuses a new sandbox, with sandbox.ErrNoSpace, while the
// filesystem of one of dirs (each, or its nearest parent that exists) is
// below f. Empty dirs are skipped.
func (f Floor) Check(dirs ...string) error {
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		why, err := f.Below(existing(dir))
		if err != nil {
			return err
		}
		if why != "" {
			return fmt.Errorf("%w: %s; free some space (agentbox removes ended jobs' workspaces after AGENTBOX_RETENTION, or at once with DELETE /v1/jobs/{id})",
				sandbox.ErrNoSpace, why)
		}
	}
	return nil
}

// existing is dir or its nearest parent that exists.
func existing(dir string) string {
	for {
		if _, err := os.Stat(dir); err == nil || filepath.Dir(dir) == dir {
			return dir
		}
		dir = filepath.Dir(dir)
	}
}

// OverQuota says why a sandbox whose workspace holds used is over its
// disk quota of bytes, or nil: its bytes, or its entries past
// sandbox.InodeLimit. Both drivers' watchdogs ask it.
func OverQuota(used Usage, bytes int64) error {
	if used.Bytes > bytes {
		return fmt.Errorf("%w: its workspace holds %s, over its %s quota; the sandbox was stopped",
			sandbox.ErrDiskQuota, units.FormatSize(used.Bytes), units.FormatSize(bytes))
	}
	if limit := sandbox.InodeLimit(bytes); used.Entries > limit {
		return fmt.Errorf("%w: its workspace holds %d files, directories and links, over the %d its %s quota allows; the sandbox was stopped",
			sandbox.ErrDiskQuota, used.Entries, limit, units.FormatSize(bytes))
	}
	return nil
}
