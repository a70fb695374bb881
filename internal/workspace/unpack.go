package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/config"
)

// Format is the kind of archive an upload is.
type Format string

// The formats Unpack reads.
const (
	FormatZip   Format = "zip"
	FormatTarGz Format = "tar.gz"
)

// Errors of Unpack and Copy. An API answers ErrTooLarge with 413 and ErrBadArchive
// with 400; the error's text says which entry and why.
var (
	// ErrTooLarge means the archive unpacks (or the tree Copy copies) to
	// more bytes or entries than Limits allow.
	ErrTooLarge = errors.New("workspace too large")
	// ErrBadArchive means the archive is not one Unpack takes: unreadable,
	// or an entry that leads out of the workspace, a device, a FIFO, a
	// clash, or a compression ratio only a zip bomb has.
	ErrBadArchive = errors.New("bad archive")
	// ErrExists means the workspace to unpack into is there already.
	ErrExists = errors.New("workspace exists")
)

// Defaults of Limits (MaxBytes's is AGENTBOX_MAX_UPLOAD's default).
const (
	DefaultMaxUploadEntries = 200_000
	DefaultMaxRatio         = 200
)

// Limits bound what unpacking one archive may cost. The zero value is the
// defaults.
type Limits struct {
	// MaxBytes is how many bytes of file content one archive may unpack
	// to, counted as they are written (a header's sizes may lie); 0 or
	// less means AGENTBOX_MAX_UPLOAD's default.
	MaxBytes int64
	// MaxEntries is how many entries (files, directories, links) one
	// archive may hold; 0 or less means DefaultMaxUploadEntries.
	MaxEntries int64
	// MaxRatio is how many bytes may be unpacked per byte of archive once
	// more than a few MiB are unpacked; 0 or less means DefaultMaxRatio.
	// Deflate reaches 1032:1 on zeros; no project's files come close.
	MaxRatio int64
}

func (l Limits) maxBytes() int64   { return orDefault(l.MaxBytes, config.Default().Server.MaxUpload) }
func (l Limits) maxEntries() int64 { return orDefault(l.MaxEntries, DefaultMaxUploadEntries) }
func (l Limits) maxRatio() int64   { return orDefault(l.MaxRatio, DefaultMaxRatio) }

// ratioFloor is how many bytes are unpacked before MaxRatio applies: a
// small archive of a highly compressible file is no bomb.
var ratioFloor int64 = 64 << 20

func orDefault(v, def int64) int64 {
	if v <= 0 {
		return def
	}
	return v
}

// Unpack makes the directory dir, which must not exist (ErrExists), from
// the archive r in format f, within lim. It unpacks into a new directory
// beside dir, which becomes dir only once the whole archive is in: on any
// error nothing is left behind. Every entry is written beneath an os.Root
// over that directory, files with O_EXCL and O_NOFOLLOW, and symlinks made
// only after every file, so no link can redirect a write. Entries that
// lead out (absolute paths, "..", links pointing out, hard links to
// anything but a file before them), devices, FIFOs, duplicate names and
// entries beneath a file or a link are refused with ErrBadArchive;
// set-uid, set-gid and sticky bits are dropped.
func Unpack(ctx context.Context, dir string, r io.Reader, f Format, lim Limits) error {
	if f != FormatZip && f != FormatTarGz {
		return fmt.Errorf("unpack: %w: format %q, want zip or tar.gz", ErrBadArchive, f)
	}
	if err := build(dir, tempUnpack, func(tmp string) error { return unpackInto(ctx, tmp, r, f, lim) }); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	return nil
}

// The kinds of the temporary directories a workspace is made in, beside
// its place: ".<id>.<kind>-<random>". A crash leaves them behind;
// RemovePartial removes them.
const (
	tempUnpack = "unpack"
	tempCopy   = "copy"
)

// build makes the directory dir, which must not exist (ErrExists), with
// fill, which writes into a new directory beside dir; that directory
// becomes dir only once fill succeeded, and is removed otherwise.
func build(dir, kind string, fill func(tmp string) error) error {
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("%s: %w", dir, ErrExists)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+"."+kind+"-")
	if err != nil {
		return err
	}
	if err := fill(tmp); err != nil {
		return errors.Join(err, removeTree(tmp))
	}
	if err := renameNoReplace(tmp, dir); err != nil {
		return errors.Join(err, removeTree(tmp))
	}
	return nil
}

// unpackInto unpacks r into the new, empty directory dir.
func unpackInto(ctx context.Context, dir string, r io.Reader, f Format, lim Limits) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	u := newUnpacker(ctx, root, lim)
	defer u.closeDir()
	if f == FormatZip {
		err = u.zip(r, filepath.Dir(dir))
	} else {
		err = u.tarGz(r)
	}
	if err != nil {
		return err
	}
	if err := u.finish(); err != nil {
		return err
	}
	return os.Chmod(dir, 0o755)
}

// removeTree removes a directory Unpack made, following no link.
func removeTree(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove partial unpack: %w", err)
	}
	return nil
}

// renameNoReplace renames the directory from to to, failing with
// ErrExists if to exists: a plain rename would replace an empty directory.
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) { // a file system without it
		if _, lerr := os.Lstat(to); lerr == nil {
			return fmt.Errorf("rename to %s: %w", to, ErrExists)
		}
		err = os.Rename(from, to)
	}
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("rename to %s: %w", to, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("rename to %s: %w", to, err)
	}
	return nil
}
