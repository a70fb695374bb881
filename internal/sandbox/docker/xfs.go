package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/sandbox"
)

// XFS project quotas: the kernel bounds the blocks and inodes of every file
// carrying a project id, and answers ENOSPC past the limit. A sandbox's
// workspace gets the project id of its uid with PROJINHERIT, so whatever it
// creates there is charged to it; nothing is charged once the ids are reset.
// golang.org/x/sys has no wrappers for these, so the structures are declared
// here from linux/dqblk_xfs.h and linux/fs.h.

const (
	xfsSuperMagic = 0x58465342
	qXGetQStat    = 0x5805 // XQM_CMD(5)
	qXSetQLim     = 0x5804 // XQM_CMD(4)
	qXGetQuota    = 0x5803 // XQM_CMD(3)
	prjQuota      = 2
	fsProjQuota   = 2      // d_flags: XFS_PROJ_QUOTA
	fsDqLimits    = 0xf    // d_fieldmask: FS_DQ_ISOFT|FS_DQ_IHARD|FS_DQ_BSOFT|FS_DQ_BHARD
	pdqEnforced   = 1 << 5 // qs_flags: FS_QUOTA_PDQ_ENFD
	projInherit   = 0x200  // FS_XFLAG_PROJINHERIT
	fsGetXattr    = 0x801c581f
	fsSetXattr    = 0x401c5820
)

// fsDiskQuota is struct fs_disk_quota (112 bytes).
type fsDiskQuota struct {
	Version      int8
	Flags        int8
	FieldMask    uint16
	ID           uint32
	BlkHardLimit uint64
	BlkSoftLimit uint64
	InoHardLimit uint64
	InoSoftLimit uint64
	BCount       uint64
	ICount       uint64
	_            [56]byte
}

// fsXattr is struct fsxattr (28 bytes).
type fsXattr struct {
	XFlags     uint32
	ExtSize    uint32
	NextEnts   uint32
	ProjID     uint32
	CowExtSize uint32
	_          [8]byte
}

// quotactlFd is quotactl_fd(2) (Linux 5.14): it needs no block device path.
func quotactlFd(dir string, cmd, id uint32, addr unsafe.Pointer) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	_, _, errno := unix.Syscall6(unix.SYS_QUOTACTL_FD, f.Fd(), uintptr(cmd<<8|prjQuota), uintptr(id), uintptr(addr), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// isXFS reports whether dir is on XFS.
func isXFS(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == xfsSuperMagic
}

// xfsQuotas reports whether the kernel enforces project quotas on the
// filesystem holding dir and this process may set them.
func xfsQuotas(dir string) bool {
	if os.Geteuid() != 0 || !isXFS(dir) {
		return false
	}
	var buf [128]byte
	if quotactlFd(dir, qXGetQStat, 0, unsafe.Pointer(&buf[0])) != nil {
		return false
	}
	flags := uint16(buf[2]) | uint16(buf[3])<<8
	return flags&pdqEnforced != 0
}

// setProjectLimit sets the block and inode limits of project id on the
// filesystem holding dir; 0 bytes removes them.
func setProjectLimit(dir string, id uint32, bytes int64) error {
	q := fsDiskQuota{Version: 1, Flags: fsProjQuota, FieldMask: fsDqLimits, ID: id}
	if bytes > 0 {
		q.BlkHardLimit = uint64(bytes+511) / 512
		q.BlkSoftLimit = q.BlkHardLimit
		// a flood of empty files cannot use up the filesystem's inodes
		inodes := uint64(sandbox.InodeLimit(bytes))
		q.InoHardLimit, q.InoSoftLimit = inodes, inodes
	}
	if err := quotactlFd(dir, qXSetQLim, id, unsafe.Pointer(&q)); err != nil {
		return fmt.Errorf("set project quota %d: %w", id, err)
	}
	return nil
}

// projectUsage is the bytes charged to project id on dir's filesystem.
func projectUsage(dir string, id uint32) (int64, error) {
	var q fsDiskQuota
	if err := quotactlFd(dir, qXGetQuota, id, unsafe.Pointer(&q)); err != nil {
		return 0, fmt.Errorf("project quota %d: %w", id, err)
	}
	return int64(q.BCount) * 512, nil
}

// setProjectTree gives every directory and regular file under dir the
// project id (0 hands them back), directories with PROJINHERIT so that what
// is created in them later inherits it. It walks through an os.Root, so no
// link leads it out of dir; other file types carry no data and are skipped.
func setProjectTree(dir string, id uint32) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("set project of %s: %w", dir, err)
	}
	defer root.Close()
	return fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		return setProject(root, name, id, d.IsDir())
	})
}

func setProject(root *os.Root, name string, id uint32, dir bool) error {
	f, err := root.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ELOOP) {
			return nil
		}
		return fmt.Errorf("set project of %s: %w", name, err)
	}
	defer f.Close()
	var x fsXattr
	if err := ioctlPtr(f, fsGetXattr, unsafe.Pointer(&x)); err != nil {
		return fmt.Errorf("project of %s: %w", name, err)
	}
	x.ProjID = id
	if dir && id != 0 {
		x.XFlags |= projInherit
	} else {
		x.XFlags &^= projInherit
	}
	if err := ioctlPtr(f, fsSetXattr, unsafe.Pointer(&x)); err != nil {
		return fmt.Errorf("set project of %s: %w", name, err)
	}
	return nil
}

func ioctlPtr(f *os.File, req uintptr, arg unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), req, uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}
