package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// errEscape is the refusal of a path that a symlink leads out of the
// workspace. Its text is os.Root's, so isEscape knows both.
var errEscape = errors.New("path escapes from parent")

// maxLinks bounds the symlinks one path may go through, as os.Root does.
const maxLinks = 8

// workspaceRoot is the workspace every file operation goes through: an
// os.Root whose paths are first walked here, never following a link.
//
// os.Root opens each directory on the way with openat(O_NOFOLLOW|
// O_DIRECTORY) and trusts the kernel to refuse a symlink. gVisor (runsc
// 20221219, which has no openat2 either) follows a link to a directory
// there, so on it os.Root alone walks etc-link/passwd into the sandbox's
// /etc. walk opens every component with O_PATH|O_NOFOLLOW, which every
// kernel honours, reads its type from the descriptor and resolves a link
// itself, within the workspace, as os.Root would; then os.Root does the
// operation. A process that swaps a directory for a link between the two
// could still win on gVisor, but every process in the sandbox has the
// guest's uid already (the guest is not a privilege boundary).
type workspaceRoot struct {
	root *os.Root
	fd   int // O_PATH descriptor of the workspace directory
}

// openWorkspace opens dir as the workspace.
func openWorkspace(dir string) (*workspaceRoot, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		root.Close()
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return &workspaceRoot{root: root, fd: fd}, nil
}

// Close closes the workspace.
func (w *workspaceRoot) Close() error {
	unix.Close(w.fd)
	return w.root.Close()
}

// walk resolves name in the workspace without following a link the kernel
// could follow out of it, and refuses a name that a link leads out. follow
// says whether the operation follows a link in the last component. A
// component that does not exist or is not a directory ends the walk
// without error: os.Root reports that.
func (w *workspaceRoot) walk(op, name string, follow bool) error {
	parts := splitPath(name)
	var dirs []int // directories descended into below the workspace
	defer func() {
		for _, fd := range dirs {
			unix.Close(fd)
		}
	}()
	links := 0
	for i := 0; i < len(parts); i++ {
		p, last := parts[i], i == len(parts)-1
		if p == ".." {
			if len(dirs) == 0 {
				return &fs.PathError{Op: op, Path: name, Err: errEscape}
			}
			unix.Close(dirs[len(dirs)-1])
			dirs = dirs[:len(dirs)-1]
			continue
		}
		parent := w.fd
		if len(dirs) > 0 {
			parent = dirs[len(dirs)-1]
		}
		fd, kind, err := openNoFollow(parent, p)
		if err != nil {
			return nil
		}
		switch {
		case kind == unix.S_IFDIR && !last:
			dirs = append(dirs, fd)
			continue
		case kind != unix.S_IFLNK || last && !follow:
			unix.Close(fd)
			return nil
		}
		target, err := readLink(fd)
		unix.Close(fd)
		if err != nil {
			return &fs.PathError{Op: op, Path: name, Err: err}
		}
		if links++; links > maxLinks {
			return &fs.PathError{Op: op, Path: name, Err: syscall.ELOOP}
		}
		if filepath.IsAbs(target) {
			return &fs.PathError{Op: op, Path: name, Err: errEscape}
		}
		parts = append(splitPath(target), parts[i+1:]...)
		i = -1
	}
	return nil
}

// splitPath splits a relative path into its components, without the empty
// and "." ones.
func splitPath(p string) []string {
	var parts []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			parts = append(parts, c)
		}
	}
	return parts
}

// openNoFollow opens name beneath dir as an O_PATH descriptor of name
// itself, a link included, and returns its file type.
func openNoFollow(dir int, name string) (int, uint32, error) {
	fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, 0, err
	}
	return fd, st.Mode & unix.S_IFMT, nil
}

// readLink reads the target of the link fd holds (an O_PATH descriptor).
func readLink(fd int) (string, error) {
	for n := 256; ; n *= 2 {
		b := make([]byte, n)
		m, err := unix.Readlinkat(fd, "", b)
		if err != nil {
			return "", fmt.Errorf("readlink: %w", err)
		}
		if m < n {
			return string(b[:m]), nil
		}
	}
}

// Stat is os.Root.Stat.
func (w *workspaceRoot) Stat(name string) (fs.FileInfo, error) {
	if err := w.walk("stat", name, true); err != nil {
		return nil, err
	}
	return w.root.Stat(name)
}

// Lstat is os.Root.Lstat.
func (w *workspaceRoot) Lstat(name string) (fs.FileInfo, error) {
	if err := w.walk("lstat", name, false); err != nil {
		return nil, err
	}
	return w.root.Lstat(name)
}

// Readlink is os.Root.Readlink.
func (w *workspaceRoot) Readlink(name string) (string, error) {
	if err := w.walk("readlink", name, false); err != nil {
		return "", err
	}
	return w.root.Readlink(name)
}

// OpenFile is os.Root.OpenFile. Like it, it never follows a link in the
// last component when creating exclusively.
func (w *workspaceRoot) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	excl := flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL
	if err := w.walk("open", name, !excl); err != nil {
		return nil, err
	}
	return w.root.OpenFile(name, flag, perm)
}

// Chmod is os.Root.Chmod.
func (w *workspaceRoot) Chmod(name string, mode fs.FileMode) error {
	if err := w.walk("chmod", name, true); err != nil {
		return err
	}
	return w.root.Chmod(name, mode)
}

// MkdirAll is os.Root.MkdirAll.
func (w *workspaceRoot) MkdirAll(name string, perm fs.FileMode) error {
	if err := w.walk("mkdir", name, true); err != nil {
		return err
	}
	return w.root.MkdirAll(name, perm)
}

// Remove is os.Root.Remove: a link is removed, not its target.
func (w *workspaceRoot) Remove(name string) error {
	if err := w.walk("remove", name, false); err != nil {
		return err
	}
	return w.root.Remove(name)
}

// RemoveAll is os.Root.RemoveAll: a link is removed, not its target.
func (w *workspaceRoot) RemoveAll(name string) error {
	if err := w.walk("remove", name, false); err != nil {
		return err
	}
	return w.root.RemoveAll(name)
}

// Rename is os.Root.Rename: links are renamed, not followed.
func (w *workspaceRoot) Rename(from, to string) error {
	if err := w.walk("rename", from, false); err != nil {
		return err
	}
	if err := w.walk("rename", to, false); err != nil {
		return err
	}
	return w.root.Rename(from, to)
}

// FS is os.Root.FS, its paths walked first too. It is what fs.WalkDir
// needs: Open, Stat and ReadDir.
func (w *workspaceRoot) FS() fs.FS { return workspaceFS{w, w.root.FS()} }

type workspaceFS struct {
	w    *workspaceRoot
	fsys fs.FS
}

func (f workspaceFS) Open(name string) (fs.File, error) {
	if err := f.w.walk("open", name, true); err != nil {
		return nil, err
	}
	return f.fsys.Open(name)
}

func (f workspaceFS) Stat(name string) (fs.FileInfo, error) {
	if err := f.w.walk("stat", name, true); err != nil {
		return nil, err
	}
	return fs.Stat(f.fsys, name)
}

func (f workspaceFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := f.w.walk("readdirent", name, true); err != nil {
		return nil, err
	}
	return fs.ReadDir(f.fsys, name)
}
