package githost

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// Bounds of what reading one workspace into a tree may cost, as for its
// zip (package artifact): a sandbox can fill its workspace with more than
// the host wants to hash, compress and diff on every request.
const (
	// maxPathBytes bounds a path the tree records, as PATH_MAX does; a
	// deeper entry is left out, with what is under it.
	maxPathBytes = 4096
	// maxTreeBytes is how much file content one tree reads; a file that
	// does not fit in what is left is recorded as a note (placeholder).
	maxTreeBytes = 2 << 30
	// maxHoleBytes is how much of a file may be holes before it is taken
	// for sparse and recorded as a note: holes cost the sandbox no disk.
	maxHoleBytes = 8 << 20
)

// maxTreeEntries is how many files and links one tree records (a
// variable for tests).
var maxTreeEntries = 500_000

// openFlags open workspace entries without following a final link or
// blocking on a FIFO.
const openFlags = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// treeWalk is the reading of one workspace into a tree.
type treeWalk struct {
	ctx     context.Context
	tmp     string            // a directory of the git dir's for this tree
	root    *os.Root          // the workspace
	objs    *objects          // the git dir's object store
	tracked map[string]string // paths of the base tree: blob id, or "" for a tree
	ignore  *ignorer
	index   bytes.Buffer // update-index --index-info input
	// bytesLeft and entriesLeft are what is left of maxTreeBytes and
	// maxTreeEntries.
	bytesLeft   int64
	entriesLeft int
	// notes say which files were not read (recorded as a note of why) or
	// left out (past the bounds on entries and path lengths): a tree with
	// notes is not the workspace's, and is never committed.
	notes []string
	// overEntries says entries were left out past maxTreeEntries.
	overEntries bool
}

// writeTree records the tree of workDir in gitDir and returns its id, as
// `git add -A` would: files, executable bits and links; what .gitignore
// ignores left out unless base (a commit, or "" for none) has it; FIFOs,
// sockets, devices and every entry named .git left out. Go reads the
// workspace, never git: through an os.Root, following no link. A file past
// the bounds above (sparse, or over what is left of maxTreeBytes) is
// recorded as a one-line note saying so instead of its content, and named
// in notes.
func (h *Host) writeTree(ctx context.Context, gitDir, workDir, base string) (tree string, notes []string, err error) {
	t, err := h.walkTree(ctx, gitDir, workDir, base)
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(t.tmp)
	index := t.tmp + "/index"
	if _, err := h.git(ctx, run{args: []string{"update-index", "-z", "--index-info"}, gitDir: gitDir, index: index,
		stdin: &t.index}); err != nil {
		return "", nil, err
	}
	out, err := h.git(ctx, run{args: []string{"write-tree"}, gitDir: gitDir, index: index})
	return line(out), t.notes, err
}

// walkTree reads workDir into its index-info lines and blobs.
func (h *Host) walkTree(ctx context.Context, gitDir, workDir, base string) (*treeWalk, error) {
	format, err := h.git(ctx, run{args: []string{"rev-parse", "--show-object-format"}, gitDir: gitDir})
	if err != nil {
		return nil, err
	}
	tracked, known, err := h.baseTree(ctx, gitDir, base)
	if err != nil {
		return nil, err
	}
	objs, err := newObjects(gitDir, line(format), known)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(workDir)
	if err != nil {
		return nil, fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	tmp, err := os.MkdirTemp(gitDir, "agentbox-tree-")
	if err != nil {
		return nil, fmt.Errorf("tree: %w", err)
	}
	t := &treeWalk{ctx: ctx, root: root, objs: objs, tracked: tracked, ignore: h.newIgnorer(gitDir, tmp), tmp: tmp,
		bytesLeft: maxTreeBytes, entriesLeft: maxTreeEntries}
	defer t.ignore.close()
	err = t.dir(".", false)
	if err == nil {
		err = objs.finish(ctx, h, gitDir)
	}
	if err != nil {
		objs.abort()
		os.RemoveAll(tmp)
		return nil, err
	}
	return t, nil
}

// baseTree lists the paths of base's tree (files with their blob ids,
// directories with ""), and the blob ids it holds.
func (h *Host) baseTree(ctx context.Context, gitDir, base string) (map[string]string, map[string]bool, error) {
	tracked, known := map[string]string{}, map[string]bool{}
	if base == "" {
		return tracked, known, nil
	}
	out, err := h.git(ctx, run{args: []string{"ls-tree", "-r", "-t", "-z", "--full-tree", "--end-of-options", base + "^{tree}"}, gitDir: gitDir})
	if err != nil {
		return nil, nil, err
	}
	for _, rec := range bytes.Split(out, []byte{0}) {
		meta, p, ok := strings.Cut(string(rec), "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			continue
		}
		if f[1] == "tree" {
			tracked[p] = ""
			continue
		}
		tracked[p], known[f[2]] = f[2], true
	}
	return tracked, known, nil
}

// dir records the entries of workspace directory p. ignoring says a
// .gitignore applies here (of p or of a directory above it).
func (t *treeWalk) dir(p string, ignoring bool) error {
	if err := context.Cause(t.ctx); t.ctx.Err() != nil {
		return err
	}
	ents, err := t.readDir(p)
	if err != nil {
		return nil // gone or unreadable: nothing to record
	}
	if has, err := t.ignore.enter(t.root, p, ents); err != nil {
		return err
	} else if has {
		ignoring = true
	}
	for _, e := range ents {
		name := e.Name()
		q := path.Join(p, name)
		if strings.EqualFold(name, ".git") {
			continue
		}
		if len(q) >= maxPathBytes {
			t.leftOut(fmt.Sprintf("%.200s…: a path of %d bytes or more, left out with what is under it", q, maxPathBytes))
			continue
		}
		if _, tracked := t.tracked[q]; !tracked && ignoring {
			ign, err := t.ignore.ignored(q, e.IsDir())
			if err != nil {
				return err
			}
			if ign {
				continue
			}
		}
		if err := t.entry(q, e, ignoring); err != nil {
			return err
		}
	}
	return nil
}

func (t *treeWalk) readDir(p string) ([]fs.DirEntry, error) {
	f, err := t.root.OpenFile(p, openFlags|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// entry records one workspace entry: a directory with what is under it,
// a regular file, or a link (its target, never what it points to).
func (t *treeWalk) entry(p string, e fs.DirEntry, ignoring bool) error {
	switch typ := e.Type(); {
	case typ.IsDir():
		return t.dir(p, ignoring)
	case typ&fs.ModeSymlink != 0:
		target, err := t.root.Readlink(p)
		if err != nil {
			return nil
		}
		id, err := t.objs.blobBytes([]byte(target))
		if err != nil {
			return err
		}
		t.add("120000", id, p)
	case typ.IsRegular():
		return t.file(p)
	}
	return nil // FIFOs, sockets, devices: git records none
}

// file records a regular file, opened without following a link; one that
// cannot be read is left out, one past the bounds recorded as a note.
func (t *treeWalk) file(p string) error {
	f, err := t.root.OpenFile(p, openFlags, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	mode := "100644"
	if fi.Mode().Perm()&0o100 != 0 {
		mode = "100755"
	}
	if why := t.charge(fi); why != "" {
		return t.note(mode, p, why)
	}
	id, err := t.objs.blobFile(f, fi.Size())
	if err != nil {
		return err
	}
	t.add(mode, id, p)
	return nil
}

// charge takes a file's size from what is left to read, or says why it
// is not read: sparse, or over what is left.
func (t *treeWalk) charge(fi fs.FileInfo) string {
	size := fi.Size()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && size-st.Blocks*512 > maxHoleBytes {
		return fmt.Sprintf("a sparse file of %d bytes", size)
	}
	if size > t.bytesLeft {
		return fmt.Sprintf("a file of %d bytes, over what is left of the %d bytes read for one diff", size, int64(maxTreeBytes))
	}
	t.bytesLeft -= size
	return ""
}

// note records file p as a one-line note of why its content was not read.
func (t *treeWalk) note(mode, p, why string) error {
	id, err := t.objs.blobBytes([]byte("agentbox left this file's content out: " + why + "\n"))
	if err != nil {
		return err
	}
	t.notes = append(t.notes, p+": "+why)
	t.add(mode, id, p)
	return nil
}

// leftOut notes that what note says was left out of the tree.
func (t *treeWalk) leftOut(note string) { t.notes = append(t.notes, note) }

func (t *treeWalk) add(mode, id, p string) {
	if t.entriesLeft <= 0 {
		if !t.overEntries {
			t.overEntries = true
			t.leftOut(fmt.Sprintf("%s and what follows: over the %d files and links one tree records", p, maxTreeEntries))
		}
		return
	}
	t.entriesLeft--
	fmt.Fprintf(&t.index, "%s %s\t%s\x00", mode, id, p)
}
