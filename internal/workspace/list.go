package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Entry is one entry of a directory as List gives it, as lstat sees it.
type Entry struct {
	Name, Path string // Path from the workspace's root
	Type       string // file, dir, symlink, fifo, socket, device, other
	Size       int64
	Mode       fs.FileMode // permission bits
	MTime      time.Time
	Target     string // a symlink's target, as written
}

// Listing is a directory as List gives it.
type Listing struct {
	Entries []Entry
	// Truncated: the directory holds more entries than were listed.
	Truncated bool
	// Hidden counts the entries hide left out.
	Hidden int
}

// MaxPathBytes is the longest path of a workspace its readers (the
// files API, the UI's Files tab) take: PATH_MAX. A sandbox can nest
// directories deeper, and a path is walked a level at a time, some of it
// once per level.
const MaxPathBytes = 4096

// maxListScanned bounds the names one List reads, hidden ones included.
const maxListScanned = 100_000

// ErrNotDir means a path given to List is not a directory of the
// workspace (absent, a file, a link).
var ErrNotDir = errors.New("not a directory of the workspace")

// List lists directory dir of root ("." for the root), following no
// link: the directory itself must be one (not a symlink), and each entry
// is described by its own lstat. Entries hide reports (by their path)
// are left out and counted; at most max entries are listed, sorted by
// name, and no more than maxListScanned names read.
func List(root *os.Root, dir string, max int, hide func(p string, dir bool) bool) (Listing, error) {
	var l Listing
	f, err := root.OpenFile(dir, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return l, fmt.Errorf("list %s: %w", dir, ErrNotDir)
	}
	defer f.Close()
	var names []string
	for len(names) < maxListScanned {
		batch, err := f.Readdirnames(1024)
		names = append(names, batch...)
		if errors.Is(err, io.EOF) || len(batch) == 0 {
			break
		}
		if err != nil {
			return l, fmt.Errorf("list %s: %w", dir, err)
		}
	}
	if len(names) >= maxListScanned {
		l.Truncated = true
	}
	slices.Sort(names)
	for _, name := range names {
		e, ok := entryOf(root, dir, name)
		if !ok {
			continue // gone meanwhile
		}
		if hide != nil && hide(e.Path, e.Type == "dir") {
			l.Hidden++
			continue
		}
		if len(l.Entries) == max {
			l.Truncated = true
			break
		}
		l.Entries = append(l.Entries, e)
	}
	return l, nil
}

// entryOf describes entry name of directory dir.
func entryOf(root *os.Root, dir, name string) (Entry, bool) {
	p := name
	if dir != "." && dir != "" {
		p = strings.TrimSuffix(dir, "/") + "/" + name
	}
	fi, err := root.Lstat(p)
	if err != nil {
		return Entry{}, false
	}
	e := Entry{Name: name, Path: path.Clean(p), Type: TypeOf(fi.Mode()), Mode: fi.Mode().Perm(), MTime: fi.ModTime()}
	if fi.Mode().IsRegular() {
		e.Size = fi.Size()
	}
	if e.Type == "symlink" {
		e.Target, _ = root.Readlink(p)
	}
	return e, true
}

// TypeOf names a file's type as List does.
func TypeOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "dir"
	case m.IsRegular():
		return "file"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "other"
}
