package tarpack

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// MaxTargetBytes bounds a symlink's target, as PATH_MAX does on Linux: the
// unpacker refuses a longer one, so the packer does first.
const MaxTargetBytes = 4095

// ReadFlags open a tree's entries for reading without blocking on a FIFO
// put where a file was.
const ReadFlags = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// ErrReplaced means an entry opened is not the one its directory listed
// or its Lstat saw: it was replaced meanwhile.
var ErrReplaced = errors.New("replaced while it was copied")

// SameEntry checks that the open file f is the entry whose Lstat is fi:
// os.Root follows a symlink that stays beneath it, and an entry may have
// been replaced by one since its directory was read.
func SameEntry(f *os.File, fi fs.FileInfo) error {
	got, err := f.Stat()
	if err != nil {
		return err
	}
	if !os.SameFile(got, fi) || got.Mode().Type() != fi.Mode().Type() {
		return ErrReplaced
	}
	return nil
}

// Join joins a slash-separated directory path ("." for the root) and a
// name in it.
func Join(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// ModeKind names a file type for an error.
func ModeKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device file"
	}
	return "an irregular file"
}

// LinkLeadsOut reports whether a symlink at the slash-separated path p
// within a tree, pointing to target, leads out of the tree, judged from
// p's directory alone: an absolute target, or one whose ".." climb above
// the tree's root. Unpack refuses such links; a packer can say so first.
func LinkLeadsOut(p, target string) bool {
	to := path.Join(path.Dir(p), target)
	return path.IsAbs(target) || to == ".." || strings.HasPrefix(to, "../")
}
