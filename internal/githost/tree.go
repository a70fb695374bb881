package githost

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentbox/agentbox/internal/artifact"
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
	// maxTreeNameBytes is how many bytes of paths one tree reads, as one
	// zip does: the walk holds the entries of every directory it is in,
	// and a path costs git's index and diff, whatever the file holds. An
	// entry whose path does not fit in what is left is left out, with
	// what is under it.
	maxTreeNameBytes = artifact.DefaultMaxNameBytes
	// readBatch is how many entries of a directory are read at once; each
	// batch is charged to the bounds before the next is read.
	readBatch = 1024
)

// maxTreeEntries is how many entries (files, links, directories) one tree
// reads; the walk stops there (a variable for tests).
var maxTreeEntries = 500_000

// openFlags open workspace entries without following a final link or
// blocking on a FIFO.
const openFlags = os.O_RDONLY | syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// treeWalk is the reading of one workspace into a tree.
type treeWalk struct {
	ctx     context.Context
	root    *os.Root          // the workspace
	objs    *objects          // the git dir's object store
	tracked map[string]string // paths of the base tree: blob id, or "" for a tree
	ignore  *ignorer
	index   *bufio.Writer // update-index --index-info input, streamed to git
	// bytesLeft, namesLeft and entriesLeft are what is left of
	// maxTreeBytes, maxTreeNameBytes and maxTreeEntries; over says the
	// entries are spent and the walk stops.
	bytesLeft   int64
	namesLeft   int64
	entriesLeft int
	over        bool
	notes       treeNotes
	all         bool // keep what .gitignore ignores
}

// writeTree records the tree of workDir in gitDir and returns its id, as
// `git add -A` would: files, executable bits and links; what .gitignore
// ignores left out unless base (a commit, or "" for none) has it; FIFOs,
// sockets, devices and every entry named .git left out. Go reads the
// workspace, never git: through an os.Root, following no link. A file past
// the bounds above (sparse, or over what is left of maxTreeBytes) is
// recorded as a one-line note saying so instead of its content, and named
// in the notes, with the entries left out; a .gitignore git is not given
// (see ignorer) is named in them too. The index-info lines go to git as
// they are made.
func (h *Host) writeTree(ctx context.Context, gitDir, workDir, base string) (tree string, notes treeNotes, err error) {
	return h.writeTreeAll(ctx, gitDir, workDir, base, false)
}

// writeTreeAll is writeTree, with all keeping what .gitignore ignores.
func (h *Host) writeTreeAll(ctx context.Context, gitDir, workDir, base string, all bool) (tree string, notes treeNotes, err error) {
	tmp, err := os.MkdirTemp(gitDir, "agentbox-tree-")
	if err != nil {
		return "", notes, fmt.Errorf("tree: %w", err)
	}
	defer os.RemoveAll(tmp)
	index := filepath.Join(tmp, "index")
	w, wait := h.startIndex(ctx, gitDir, index)
	notes, err = h.walkTree(ctx, gitDir, workDir, base, tmp, w, all)
	w.CloseWithError(err) // nil: git reads the end of its input
	if indexErr := wait(); err == nil {
		err = indexErr
	}
	if err != nil {
		return "", notes, err
	}
	out, err := h.git(ctx, run{args: []string{"write-tree"}, gitDir: gitDir, index: index})
	return line(out), notes, err
}

// errIndexEnded is what a write to the index pipe gets once git is gone.
var errIndexEnded = errors.New("git update-index ended")

// startIndex runs `git update-index --index-info` on index file index,
// fed through w as the walk goes, so a tree's lines are never all held.
// Closing w ends git's input; wait waits for git. Once git is gone, a
// write to w fails.
func (h *Host) startIndex(ctx context.Context, gitDir, index string) (w *io.PipeWriter, wait func() error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := h.git(ctx, run{args: []string{"update-index", "-z", "--index-info"}, gitDir: gitDir, index: index, stdin: pr})
		pr.CloseWithError(cmp.Or(err, errIndexEnded))
		done <- err
	}()
	return pw, func() error { return <-done }
}

// walkTree reads workDir into index-info lines written to index, and
// blobs; tmp is a directory of its own for the ignore rules.
func (h *Host) walkTree(ctx context.Context, gitDir, workDir, base, tmp string, index io.Writer, all bool) (treeNotes, error) {
	format, err := h.git(ctx, run{args: []string{"rev-parse", "--show-object-format"}, gitDir: gitDir})
	if err != nil {
		return treeNotes{}, err
	}
	tracked, known, err := h.baseTree(ctx, gitDir, base)
	if err != nil {
		return treeNotes{}, err
	}
	objs, err := newObjects(gitDir, line(format), known)
	if err != nil {
		return treeNotes{}, err
	}
	root, err := os.OpenRoot(workDir)
	if err != nil {
		return treeNotes{}, fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	t := &treeWalk{ctx: ctx, root: root, objs: objs, tracked: tracked, index: bufio.NewWriterSize(index, 64<<10),
		bytesLeft: maxTreeBytes, namesLeft: maxTreeNameBytes, entriesLeft: maxTreeEntries, all: all}
	t.ignore = h.newIgnorer(gitDir, tmp, &t.notes.rules)
	defer t.ignore.done()
	err = t.dir(".", false)
	if err == nil {
		err = t.flush()
	}
	if err == nil {
		err = objs.finish(ctx, h, gitDir)
	}
	if err != nil {
		objs.abort()
		return treeNotes{}, err
	}
	return t.notes, nil
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
	if !t.all {
		has, err := t.ignore.enter(t.root, p, ents)
		if err != nil {
			return err
		}
		ignoring = ignoring || has
	}
	for _, e := range ents {
		q := path.Join(p, e.Name())
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

// readDir reads the entries of directory p to record, a batch at a time,
// each charged to the walk's bounds as it is read: no more than the walk
// has room for is held.
func (t *treeWalk) readDir(p string) ([]fs.DirEntry, error) {
	if t.over {
		return nil, nil
	}
	f, err := t.root.OpenFile(p, openFlags|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ents []fs.DirEntry
	for !t.over {
		batch, err := f.ReadDir(readBatch)
		for _, e := range batch {
			if t.take(p, e) {
				ents = append(ents, e)
			}
		}
		if err != nil || len(batch) < readBatch {
			break // io.EOF, or unreadable from here: what was read is recorded
		}
	}
	return ents, nil
}

// take charges entry e of directory p to the walk's entries and path
// bytes, and says whether it is to be recorded: not a .git, and within
// the bounds; one past them is noted as left out.
func (t *treeWalk) take(p string, e fs.DirEntry) bool {
	if t.over {
		return false
	}
	if t.entriesLeft <= 0 {
		t.over = true
		t.leftOutEntry(p, e.Name(), fmt.Sprintf(" and what follows: over the %d entries one tree reads", maxTreeEntries))
		return false
	}
	t.entriesLeft--
	// The path's length, without making it: most entries past the
	// bounds are never joined.
	n := len(p) + 1 + len(e.Name())
	if p == "." {
		n = len(e.Name())
	}
	switch {
	case strings.EqualFold(e.Name(), ".git"):
		return false
	case n >= maxPathBytes:
		t.leftOutEntry(p, e.Name(), fmt.Sprintf(": a path of %d bytes or more, left out with what is under it", maxPathBytes))
		return false
	case int64(n) > t.namesLeft:
		t.leftOutEntry(p, e.Name(), fmt.Sprintf(": over the %d bytes of paths one tree reads, left out with what is under it", int64(maxTreeNameBytes)))
		return false
	}
	t.namesLeft -= int64(n)
	return true
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
		return t.add("120000", id, p)
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
	return t.add(mode, id, p)
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
	t.notes.lacking.add(short(p) + ": " + why)
	return t.add(mode, id, p)
}

// leftOutEntry notes that entry name of directory p was left out, and
// why (after its path); its path is made only for a note that is kept.
func (t *treeWalk) leftOutEntry(p, name, why string) {
	if t.notes.lacking.full() {
		t.notes.lacking.more++
		return
	}
	t.notes.lacking.add(short(path.Join(p, name)) + why)
}

// add writes the index-info line of one entry.
func (t *treeWalk) add(mode, id, p string) error {
	if _, err := fmt.Fprintf(t.index, "%s %s\t%s\x00", mode, id, p); err != nil {
		return fmt.Errorf("tree index: %w", err)
	}
	return nil
}

// flush writes what is buffered of the index-info lines.
func (t *treeWalk) flush() error {
	if err := t.index.Flush(); err != nil {
		return fmt.Errorf("tree index: %w", err)
	}
	return nil
}
