package workspace

import (
	"context"
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

	"github.com/agentbox/agentbox/internal/tarpack"
)

// maxPathBytes bounds an entry's path, as PATH_MAX does on Linux;
// maxTargetBytes a link's target (tarpack.MaxTargetBytes, which the packer
// checks too); maxNameBytes the paths and targets of one archive, which
// the unpacker holds until it is done.
const (
	maxPathBytes   = 4095
	maxTargetBytes = tarpack.MaxTargetBytes
	maxNameBytes   = 32 << 20
)

// kind is what the unpacker made at a path.
type kind uint8

const (
	kindDir kind = iota + 1
	kindFile
	kindLink // made only at the end
)

// pending is a symlink or a directory's mode, applied at the end.
type pending struct {
	path   string
	target string      // of a symlink
	mode   fs.FileMode // of a directory
	mtime  time.Time
}

// unpacker writes one archive's entries beneath root.
type unpacker struct {
	ctx     context.Context
	root    *os.Root
	lim     Limits
	entries int64 // the directories made for entries beneath them too
	names   int64 // bytes of paths and link targets held
	written int64
	in      func() int64 // bytes of archive read so far, for the ratio; nil: no ratio
	made    map[string]kind
	links   []pending
	dirs    []pending
	buf     []byte
	last    *os.Root // over lastDir, the directory of the last file written
	lastDir string
}

func newUnpacker(ctx context.Context, root *os.Root, lim Limits) *unpacker {
	return &unpacker{ctx: ctx, root: root, lim: lim, made: map[string]kind{}, buf: make([]byte, 64<<10)}
}

// badf is an ErrBadArchive saying why.
func badf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadArchive, fmt.Sprintf(format, args...))
}

// cleanName turns an entry's name into a path within the workspace ("" for
// its root), refusing names that lead out of it.
func cleanName(name string) (string, error) {
	switch {
	case name == "":
		return "", badf("an entry with no name")
	case strings.ContainsAny(name, "\x00\\"):
		return "", badf("entry %q: a NUL or a backslash in its name", name)
	case strings.HasPrefix(name, "/"):
		return "", badf("entry %q: an absolute path", name)
	}
	var parts []string
	for _, c := range strings.Split(name, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			return "", badf("entry %q: a path with \"..\"", name)
		}
		parts = append(parts, c)
	}
	p := strings.Join(parts, "/")
	if len(p) > maxPathBytes {
		return "", badf("entry %.64q...: a path of %d bytes, over %d", p, len(p), maxPathBytes)
	}
	return p, nil
}

// begin counts one entry and checks that p may be made as k: nothing is
// at p yet (but a directory may be given again), and every directory
// above p is a directory, not a file or a link. It makes those
// directories. skip says p is a directory there already.
func (u *unpacker) begin(p string, k kind) (skip bool, err error) {
	if err := u.ctx.Err(); err != nil {
		return false, err
	}
	if err := u.count(p); err != nil {
		return false, err
	}
	if p == "" {
		if k != kindDir {
			return false, badf("an entry that is not a directory in the workspace's place")
		}
		return true, nil
	}
	if had, ok := u.made[p]; ok {
		if had == kindDir && k == kindDir {
			return true, nil
		}
		return false, badf("entry %q: given twice, or a file and a directory of the same name", p)
	}
	return false, u.parents(p)
}

// count takes one entry, and the bytes of its name s, out of the limits.
func (u *unpacker) count(s string) error {
	if u.entries++; u.entries > u.lim.maxEntries() {
		return fmt.Errorf("%w: more than %d entries", ErrTooLarge, u.lim.maxEntries())
	}
	if u.names += int64(len(s)); u.names > maxNameBytes {
		return fmt.Errorf("%w: more than %d bytes of names", ErrTooLarge, maxNameBytes)
	}
	return nil
}

// parents makes the directories above p that are not there yet, each
// counted as an entry. A directory the unpacker made has only directories
// above it, so the walk up stops at the first.
func (u *unpacker) parents(p string) error {
	var missing []string
	for dir := path.Dir(p); dir != "." && u.made[dir] != kindDir; dir = path.Dir(dir) {
		if u.made[dir] != 0 {
			return badf("entry %q: beneath %q, which is not a directory", p, dir)
		}
		missing = append(missing, dir)
	}
	for _, dir := range slices.Backward(missing) {
		if err := u.count(dir); err != nil {
			return err
		}
		if err := u.root.Mkdir(dir, 0o755); err != nil {
			return u.fsErr(p, err)
		}
		u.made[dir] = kindDir
	}
	return nil
}

// fsErr reports the failure to make entry p: a name the file system takes
// no file of is the archive's fault, anything else the host's.
func (u *unpacker) fsErr(p string, err error) error {
	if errors.Is(err, syscall.ENAMETOOLONG) || errors.Is(err, syscall.EILSEQ) || errors.Is(err, fs.ErrExist) {
		return badf("entry %q: %v", p, err)
	}
	return fmt.Errorf("entry %q: %w", p, err)
}

// dir makes the directory p; its mode is applied at the end, so that the
// entries beneath it can still be written.
func (u *unpacker) dir(name string, mode fs.FileMode, mtime time.Time) error {
	p, err := cleanName(name)
	if err != nil {
		return err
	}
	return u.mkdir(p, mode, mtime)
}

// mkdir makes the directory at the clean path p.
func (u *unpacker) mkdir(p string, mode fs.FileMode, mtime time.Time) error {
	skip, err := u.begin(p, kindDir)
	if err != nil || p == "" {
		return err
	}
	if !skip {
		if err := u.root.Mkdir(p, 0o755); err != nil {
			return u.fsErr(p, err)
		}
		u.made[p] = kindDir
	}
	u.dirs = append(u.dirs, pending{path: p, mode: mode, mtime: mtime})
	return nil
}

// file writes the regular file p from r, counting the bytes written, not
// those its header declares.
func (u *unpacker) file(name string, mode fs.FileMode, mtime time.Time, r io.Reader) error {
	p, err := cleanName(name)
	if err != nil {
		return err
	}
	return u.writeFile(p, mode, mtime, r)
}

// writeFile writes the regular file at the clean path p from r.
func (u *unpacker) writeFile(p string, mode fs.FileMode, mtime time.Time, r io.Reader) error {
	if _, err := u.begin(p, kindFile); err != nil {
		return err
	}
	dir, name, err := u.dirOf(p)
	if err != nil {
		return u.fsErr(p, err)
	}
	f, err := dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return u.fsErr(p, err)
	}
	u.made[p] = kindFile
	err = u.copy(f, r, p)
	if err == nil {
		err = f.Chmod(mode.Perm())
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("entry %q: %w", p, cerr)
	}
	if err == nil && !mtime.IsZero() {
		err = dir.Chtimes(name, mtime, mtime)
	}
	return err
}

// dirOf returns a root over the directory holding p, and p's name in it.
// The last one is kept open: entries mostly come a directory at a time,
// and each path looked up beneath root costs a lookup per directory. The
// unpacker made every directory, and makes no symlink before finish, so
// nothing on the way is a link.
func (u *unpacker) dirOf(p string) (*os.Root, string, error) {
	dir, name := path.Split(p)
	if dir == "" {
		return u.root, name, nil
	}
	if dir != u.lastDir {
		u.closeDir()
		r, err := u.root.OpenRoot(dir)
		if err != nil {
			return nil, "", err
		}
		u.last, u.lastDir = r, dir
	}
	return u.last, name, nil
}

// closeDir closes the directory dirOf kept open.
func (u *unpacker) closeDir() {
	if u.last != nil {
		u.last.Close()
		u.last, u.lastDir = nil, ""
	}
}

// copy copies r to f within the limits on bytes and on the ratio.
func (u *unpacker) copy(f *os.File, r io.Reader, p string) error {
	for {
		if err := u.ctx.Err(); err != nil {
			return err
		}
		n, rerr := r.Read(u.buf)
		if u.written += int64(n); u.written > u.lim.maxBytes() {
			return fmt.Errorf("%w: more than %d bytes of files", ErrTooLarge, u.lim.maxBytes())
		}
		if u.in != nil && u.written > ratioFloor && u.written > u.lim.maxRatio()*u.in() {
			return badf("entry %q: more than %d bytes unpacked per byte of archive: a zip bomb", p, u.lim.maxRatio())
		}
		if _, err := f.Write(u.buf[:n]); err != nil {
			return fmt.Errorf("entry %q: %w", p, err)
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return badf("entry %q: %v", p, rerr)
		}
	}
}

// hardLink makes p a hard link to target, which must be a regular file an
// earlier entry made.
func (u *unpacker) hardLink(name, target string) error {
	p, err := cleanName(name)
	if err != nil {
		return err
	}
	t, err := cleanName(target)
	if err != nil {
		return badf("hard link %q: to %q, outside the workspace", name, target)
	}
	if u.made[t] != kindFile {
		return badf("hard link %q: to %q, not a file made before it", name, target)
	}
	if _, err := u.begin(p, kindFile); err != nil {
		return err
	}
	if err := u.root.Link(t, p); err != nil {
		return u.fsErr(p, err)
	}
	u.made[p] = kindFile
	return nil
}

// symlink keeps the symlink p for the end, refusing a target that leads
// out of the workspace judged from p's directory. The link is made with
// its target cleaned, so every ".." comes first and climbs real
// directories, never another link's target.
func (u *unpacker) symlink(name, target string) error {
	p, err := cleanName(name)
	if err != nil {
		return err
	}
	switch {
	case target == "" || len(target) > maxTargetBytes || strings.ContainsRune(target, 0):
		return badf("symlink %q: an empty, too long or NUL-holding target", p)
	case LinkLeadsOut(p, target):
		return badf("symlink %q: to %q, outside the workspace", p, target)
	}
	return u.link(p, path.Clean(target))
}

// link keeps the symlink at the clean path p, to target as it is, for the
// end.
func (u *unpacker) link(p, target string) error {
	if _, err := u.begin(p, kindLink); err != nil {
		return err
	}
	u.made[p] = kindLink
	u.names += int64(len(target))
	u.links = append(u.links, pending{path: p, target: target})
	return nil
}

// finish makes the symlinks, then applies the directories' modes and
// times, deepest first: making an entry changes its directory's time.
func (u *unpacker) finish() error {
	u.closeDir()
	for _, l := range u.links {
		if err := u.root.Symlink(l.target, l.path); err != nil {
			return u.fsErr(l.path, err)
		}
	}
	slices.SortStableFunc(u.dirs, func(a, b pending) int { return strings.Count(b.path, "/") - strings.Count(a.path, "/") })
	for _, d := range u.dirs {
		// The owner keeps rwx: the workspace is worked in.
		if err := u.root.Chmod(d.path, d.mode.Perm()|0o700); err != nil {
			return fmt.Errorf("entry %q: %w", d.path, err)
		}
		if !d.mtime.IsZero() {
			if err := u.root.Chtimes(d.path, d.mtime, d.mtime); err != nil {
				return fmt.Errorf("entry %q: %w", d.path, err)
			}
		}
	}
	return nil
}
