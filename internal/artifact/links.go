package artifact

import (
	"archive/zip"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
)

// maxLinkTarget is the longest symlink target stored; maxLinkBytes bounds
// the memory taken by the links kept for the end of the zip.
const (
	maxLinkTarget = 1024
	maxLinkBytes  = 16 << 20
)

// link is a symlink to store once every file and directory is in: an
// extractor then finds the whole tree made of real directories, and never
// writes a later entry through a link, not even one whose name matches a
// directory's on a case- or normalization-insensitive file system.
type link struct {
	path, entry    string
	target, stored string // as read, and as stored (cleaned)
}

// deferredLinks are the links kept for the end, and their size in bytes.
type deferredLinks struct {
	list  []link
	bytes int
}

// addLink keeps a symlink for the end of the zip, or leaves it out when its
// target is not safe.
func (z *zipper) addLink(p, entry string) {
	target, err := z.root.Readlink(p)
	if err != nil {
		z.unreadable(p, err)
		return
	}
	if why := unsafeTarget(p, target); why != "" {
		z.leftOut(p, why)
		return
	}
	l := link{path: p, entry: entry, target: target, stored: path.Clean(target)}
	cost := len(l.path) + len(l.entry) + len(l.target) + len(l.stored)
	if z.links.bytes+cost > maxLinkBytes {
		z.leftOut(p, "symlink: more symlinks than one zip stores")
		return
	}
	z.links.bytes += cost
	z.links.list = append(z.links.list, l)
}

// unsafeTarget says why the symlink at p, pointing to target, must not be
// stored, or returns "". A stored link points inside the workspace, judged
// from p's directory alone; its target is stored cleaned (path.Clean), so
// every ".." in it comes first and climbs real directories, never the
// target of another link.
func unsafeTarget(p, target string) string {
	if len(target) > maxLinkTarget {
		return fmt.Sprintf("symlink with a target of %d bytes; at most %d are stored", len(target), maxLinkTarget)
	}
	if path.IsAbs(target) {
		return fmt.Sprintf("symlink to %q, outside the workspace", target)
	}
	for _, c := range strings.Split(target, "/") {
		if c != "" && c != "." && c != ".." && safeName(c) != c {
			return fmt.Sprintf("symlink to %q, which is not a safe path on every system", target)
		}
	}
	if to := path.Join(path.Dir(p), target); to == ".." || strings.HasPrefix(to, "../") {
		return fmt.Sprintf("symlink to %q, outside the workspace", target)
	}
	return ""
}

// writeLinks stores the links kept for the end.
func (z *zipper) writeLinks() error {
	for _, l := range z.links.list {
		fh := &zip.FileHeader{Name: l.entry, Method: zip.Store}
		fh.SetMode(fs.ModeSymlink | 0o777)
		zf, err := z.zw.CreateHeader(fh)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(zf, l.stored); err != nil {
			return err
		}
		z.stored(l.path, l.entry)
		if l.stored != l.target {
			z.note(Note{Path: l.path, Entry: l.entry, Why: fmt.Sprintf("symlink to %q stored as a link to %q", l.target, l.stored)})
		}
	}
	z.links = deferredLinks{}
	return nil
}
