package githost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// maxPathBytes bounds a workspace path the tree records, as PATH_MAX does;
// a deeper entry is left out, with what is under it.
const maxPathBytes = 4096

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
	index   bytes.Buffer // update-index --index-info input
}

// writeTree records the tree of workDir in gitDir and returns its id, as
// `git add -A` would: files, executable bits and links; what .gitignore
// ignores left out unless base (a commit, or "" for none) has it; FIFOs,
// sockets, devices and every entry named .git left out. Go reads the
// workspace, never git: through an os.Root, following no link.
func (h *Host) writeTree(ctx context.Context, gitDir, workDir, base string) (string, error) {
	format, err := h.git(ctx, run{args: []string{"rev-parse", "--show-object-format"}, gitDir: gitDir})
	if err != nil {
		return "", err
	}
	tracked, known, err := h.baseTree(ctx, gitDir, base)
	if err != nil {
		return "", err
	}
	objs, err := newObjects(gitDir, line(format), known)
	if err != nil {
		return "", err
	}
	root, err := os.OpenRoot(workDir)
	if err != nil {
		return "", fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	tmp, err := os.MkdirTemp(gitDir, "agentbox-tree-")
	if err != nil {
		return "", fmt.Errorf("tree: %w", err)
	}
	defer os.RemoveAll(tmp)
	t := &treeWalk{ctx: ctx, root: root, objs: objs, tracked: tracked, ignore: h.newIgnorer(gitDir, tmp)}
	defer t.ignore.close()
	if err := t.dir(".", false); err != nil {
		return "", err
	}
	index := tmp + "/index"
	if _, err := h.git(ctx, run{args: []string{"update-index", "-z", "--index-info"}, gitDir: gitDir, index: index,
		stdin: &t.index}); err != nil {
		return "", err
	}
	tree, err := h.git(ctx, run{args: []string{"write-tree"}, gitDir: gitDir, index: index})
	return line(tree), err
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
		if strings.EqualFold(name, ".git") || len(q) >= maxPathBytes {
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
// cannot be read is left out.
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
	id, err := t.objs.blobFile(f, fi.Size())
	if err != nil {
		return err
	}
	mode := "100644"
	if fi.Mode().Perm()&0o100 != 0 {
		mode = "100755"
	}
	t.add(mode, id, p)
	return nil
}

func (t *treeWalk) add(mode, id, p string) {
	fmt.Fprintf(&t.index, "%s %s\t%s\x00", mode, id, p)
}

// errIgnorer is why asking which paths are ignored failed.
var errIgnorer = errors.New("git check-ignore")
