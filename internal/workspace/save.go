package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/agentbox/agentbox/internal/blobs"
)

// saver walks a hostile tree as Copy does (see copier) and records it as
// trees, putting the blobs of the files that changed since prev and the
// trees of the directories whose listing changed.
type saver struct {
	ctx       context.Context
	b         blobs.Store
	ns        string
	src       *os.Root
	prev      map[string]fileStat
	prevTrees map[string]treeState
	known     map[string]bool // digests the namespace holds
	files     map[string]fileStat
	trees     map[string]treeState
	stats     SaveStats
	leftOut   skipNotes // stats.Skipped once saved
	bytes     int64
	buf       []byte
	entries   int64
	batch     *batches // nil: a store without batches
	budget    saveBudget
}

func newSaver(ctx context.Context, b blobs.Store, ns string, src *os.Root, prev *Snapshot) *saver {
	s := &saver{ctx: ctx, b: b, ns: ns, src: src, known: map[string]bool{},
		files: map[string]fileStat{}, trees: map[string]treeState{}, buf: make([]byte, 64<<10),
		budget: newSaveBudget(ctx)}
	s.batch = batcher(b, &s.stats)
	if prev != nil && prev.ns == ns {
		s.prev, s.prevTrees = prev.files, prev.trees
		for _, f := range prev.files {
			s.known[f.digest] = true
		}
		for _, t := range prev.trees {
			s.known[t.digest] = true
		}
	}
	return s
}

func (s *saver) skip(p, why string) { s.leftOut.add(p, why) }

// dir records the directory p ("." for the root), whose Lstat is fi, and
// what is under it, and returns the digest of its tree.
func (s *saver) dir(p string, fi fs.FileInfo) (string, error) {
	names, err := listDir(s.src, p, fi, maxCheckpointEntries-s.entries, maxCheckpointEntries)
	if err != nil {
		return "", err
	}
	s.entries += int64(len(names))
	entries := make([]treeEntry, 0, len(names))
	for _, name := range names {
		e, ok, err := s.entry(join(p, name), name)
		if err != nil {
			return "", err
		}
		if ok {
			entries = append(entries, e)
			s.stats.Entries++
		}
	}
	return s.putTree(p, entries)
}

// putTree records entries as the tree of the directory p: the tree the
// last checkpoint had if they are its entries, else encoded and put if
// the store lacks it.
func (s *saver) putTree(p string, entries []treeEntry) (string, error) {
	s.stats.Trees++
	if old, ok := s.prevTrees[p]; ok && slices.Equal(old.entries, entries) {
		s.trees[p] = old
		return old.digest, nil
	}
	data, d, err := encodeTree(entries)
	if err != nil {
		return "", err
	}
	s.trees[p] = treeState{digest: d, entries: entries}
	if s.known[d] {
		return d, nil
	}
	s.known[d] = true
	if s.batch != nil && len(data) <= blobs.MaxBatchBlob {
		return d, s.addTree(d, data)
	}
	if has, err := s.b.Has(s.ctx, s.ns, d); err != nil || has {
		return d, storeErr(err)
	}
	if err := s.b.Put(s.ctx, s.ns, d, int64(len(data)), bytes.NewReader(data)); err != nil {
		return "", fmt.Errorf("put the tree of %q: %w", p, storeErr(err))
	}
	s.stats.TreesUploaded++
	s.stats.TreeBytes += int64(len(data))
	return d, nil
}

// entry records the entry name at p: a directory and what is under it, a
// file, a symlink; anything else is skipped (ok false). The sandbox may
// change its tree while the walk reads it: an entry that is gone, or was
// replaced, between its directory's listing and its read is left out
// (and noted), not the checkpoint's failure, so that a build or a file
// watcher running at a step boundary does not leave the job without
// checkpoints. What the blob store fails, or a limit, fails it.
func (s *saver) entry(p, name string) (treeEntry, bool, error) {
	e, ok, err := s.entryOf(p, name)
	if err != nil && changedMeanwhile(err) {
		s.skip(p, "changed while it was checkpointed ("+err.Error()+"), which this checkpoint leaves out")
		return e, false, nil
	}
	return e, ok, err
}

func (s *saver) entryOf(p, name string) (e treeEntry, ok bool, err error) {
	if err := s.ctx.Err(); err != nil {
		return e, false, err
	}
	if len(p) > maxPathBytes {
		s.skip(p[:64]+"...", fmt.Sprintf("a path of %d bytes, over %d", len(p), maxPathBytes))
		return e, false, nil
	}
	if s.unnamable(p) {
		return e, false, nil
	}
	fi, err := s.src.Lstat(p)
	if err != nil {
		return e, false, fmt.Errorf("entry %q: %w", p, err)
	}
	// An entry k directories down is in a tree k deep; a directory's own
	// tree is one deeper. Restore takes no tree maxTreeDepth deep.
	if k := strings.Count(p, "/"); k >= maxTreeDepth || fi.IsDir() && k+1 >= maxTreeDepth {
		s.skip(p, fmt.Sprintf("deeper than %d directories, which is not checkpointed", maxTreeDepth))
		return e, false, nil
	}
	e = treeEntry{Name: name, Mode: fi.Mode().Perm(), MTime: fi.ModTime().UnixNano()}
	switch m := fi.Mode(); {
	case m.IsDir():
		e.Kind = entryDir
		e.Digest, err = s.dir(p, fi)
		return e, err == nil, err
	case m.IsRegular():
		e.Kind = entryFile
		return s.file(p, e, fi)
	case m&fs.ModeSymlink != 0:
		return s.symlink(p, e)
	default:
		s.skip(p, modeKind(m)+", which is not checkpointed")
		return e, false, nil
	}
}

// symlink records the symlink p with its target as it is (and no mtime:
// a restore does not keep it).
func (s *saver) symlink(p string, e treeEntry) (treeEntry, bool, error) {
	target, err := s.src.Readlink(p)
	if err != nil {
		return e, false, fmt.Errorf("entry %q: %w", p, err)
	}
	if target == "" || len(target) > maxTargetBytes {
		s.skip(p, fmt.Sprintf("a symlink with a target of %d bytes", len(target)))
		return e, false, nil
	}
	e.Kind, e.Target, e.MTime = entrySymlink, target, 0
	return e, true, nil
}

// file records the regular file p, whose Lstat is fi: with the digest it
// had if its stat is what the last checkpoint saw, else read, hashed and
// put if the store lacks it.
func (s *saver) file(p string, e treeEntry, fi fs.FileInfo) (treeEntry, bool, error) {
	st, ok := statOf(fi, "")
	if old, seen := s.prev[p]; ok && seen && old.sameAs(st) {
		st.digest = old.digest
	} else {
		var err error
		if st, err = s.read(p, fi); err != nil {
			return e, false, s.skipped(p, err)
		}
	}
	e.Size, e.Digest = st.size, st.digest
	s.files[p], s.known[st.digest] = st, true
	s.stats.Files++
	s.bytes += st.size
	return e, true, nil
}

// sameAs reports whether the file is as it was at f.
func (f fileStat) sameAs(g fileStat) bool {
	f.digest = g.digest
	return f == g
}

// read opens the file p, checks it is the entry fi, hashes it and puts
// its blob unless the store has it. A file that changes between the hash
// and the put (ErrCorrupt) is read once more; twice fails the checkpoint.
func (s *saver) read(p string, fi fs.FileInfo) (fileStat, error) {
	f, err := s.src.OpenFile(p, readFlags, 0)
	if err != nil {
		return fileStat{}, fmt.Errorf("entry %q: %w", p, err)
	}
	defer f.Close()
	if err := sameEntry(f, fi); err != nil {
		return fileStat{}, fmt.Errorf("entry %q: %w", p, err)
	}
	// What the next checkpoint compares with is the stat from before the
	// read: a write during it changes the ctime, and the file is read again.
	now, err := f.Stat()
	if err != nil {
		return fileStat{}, fmt.Errorf("entry %q: %w", p, err)
	}
	st, _ := statOf(now, "")
	if err := s.budget.admit(f, now.Size()); err != nil {
		return fileStat{}, fmt.Errorf("entry %q: %w", p, err)
	}
	for try := 0; ; try++ {
		st.digest, st.size, err = s.hashPut(f)
		if !errors.Is(err, blobs.ErrCorrupt) || try == 1 {
			break
		}
	}
	if errors.Is(err, blobs.ErrCorrupt) {
		return fileStat{}, errSkip{"a file that changed while it was checkpointed, twice, which this checkpoint leaves out"}
	}
	if err != nil {
		return fileStat{}, fmt.Errorf("entry %q: %w", p, err)
	}
	return st, nil
}

// hashPut hashes f from its start, then puts it from its start again if
// the namespace lacks its blob (the store checks it is what was hashed).
// A small file, with a store that batches, is read once and batched.
func (s *saver) hashPut(f *os.File) (string, int64, error) {
	if fi, err := f.Stat(); err == nil && s.batch != nil && fi.Size() <= blobs.MaxBatchBlob {
		data, ok, err := readSmall(f)
		if err != nil {
			return "", 0, err
		}
		if s.budget.read += int64(len(data)); s.budget.read > s.budget.lim.maxNewBytes() {
			return "", 0, s.budget.over()
		}
		if ok {
			d := blobs.Digest(data)
			if !s.known[d] {
				s.known[d] = true
				err = s.addFile(d, data)
			}
			return d, int64(len(data)), err
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", 0, err
	}
	h := sha256.New()
	n, err := io.CopyBuffer(h, s.budget.reader(f), s.buf)
	if err != nil {
		return "", 0, err
	}
	d := hex.EncodeToString(h.Sum(nil))
	if s.known[d] {
		return d, n, nil
	}
	if has, err := s.b.Has(s.ctx, s.ns, d); err != nil || has {
		return d, n, storeErr(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", 0, err
	}
	if err := s.b.Put(s.ctx, s.ns, d, n, onlyReader{f}); err != nil {
		return "", 0, storeErr(err)
	}
	s.stats.Uploaded++
	s.stats.UploadedBytes += n
	return d, n, nil
}

// onlyReader hides an *os.File's WriterTo, so that io.CopyBuffer uses
// its buffer.
type onlyReader struct{ r io.Reader }

func (r onlyReader) Read(p []byte) (int, error) { return r.r.Read(p) }

// storeFailed is an error of the blob store: it fails the checkpoint, and
// is never taken for a file that changed.
type storeFailed struct{ err error }

func (e storeFailed) Error() string { return e.err.Error() }
func (e storeFailed) Unwrap() error { return e.err }

// storeErr marks err, if any, as the blob store's.
func storeErr(err error) error {
	if err == nil {
		return nil
	}
	return storeFailed{err}
}

// changedMeanwhile reports whether err, met reading the sandbox's tree,
// says an entry changed under the walk: gone, replaced by another, or
// reached through a directory swapped for a link.
func changedMeanwhile(err error) bool {
	var sf storeFailed
	if errors.As(err, &sf) {
		return false
	}
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, errReplaced) || errors.Is(err, syscall.ELOOP) ||
		errors.Is(err, syscall.ENOTDIR) || strings.Contains(err.Error(), "path escapes from parent")
}
