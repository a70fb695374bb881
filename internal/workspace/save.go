package workspace

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/agentbox/agentbox/internal/blobs"
)

// saver walks a hostile tree as Copy does (see copier) and records it in
// a manifest, putting the blobs of the files that changed since prev.
type saver struct {
	ctx     context.Context
	b       blobs.Store
	ns      string
	src     *os.Root
	prev    map[string]fileStat
	known   map[string]bool // digests the namespace holds
	m       manifest
	files   map[string]fileStat
	stats   SaveStats
	bytes   int64
	buf     []byte
	entries int64
	budget  saveBudget
}

func newSaver(ctx context.Context, b blobs.Store, ns string, src *os.Root, prev *Snapshot) *saver {
	s := &saver{ctx: ctx, b: b, ns: ns, src: src, known: map[string]bool{},
		files: map[string]fileStat{}, m: manifest{Version: 1}, buf: make([]byte, 64<<10), budget: newSaveBudget(ctx)}
	if prev != nil && prev.ns == ns {
		s.prev = prev.files
		for _, f := range prev.files {
			s.known[f.digest] = true
		}
	}
	return s
}

func (s *saver) skip(p, why string) { s.stats.Skipped = append(s.stats.Skipped, p+": "+why) }

// dir records the entries of the directory p ("." for the root), whose
// Lstat is fi, and what is under them.
func (s *saver) dir(p string, fi fs.FileInfo) error {
	names, err := listDir(s.src, p, fi, maxCheckpointEntries-s.entries, maxCheckpointEntries)
	if err != nil {
		return err
	}
	s.entries += int64(len(names))
	for _, name := range names {
		if err := s.entry(join(p, name)); err != nil {
			return err
		}
	}
	return nil
}

// entry records the entry at p: a directory and what is under it, a
// file, a symlink; anything else is skipped.
func (s *saver) entry(p string) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	if len(p) > maxPathBytes {
		s.skip(p[:64]+"...", fmt.Sprintf("a path of %d bytes, over %d", len(p), maxPathBytes))
		return nil
	}
	if s.unnamable(p) {
		return nil
	}
	fi, err := s.src.Lstat(p)
	if err != nil {
		return fmt.Errorf("entry %q: %w", p, err)
	}
	e := manifestEntry{Path: p, Mode: fi.Mode().Perm(), MTime: fi.ModTime().UnixNano()}
	switch m := fi.Mode(); {
	case m.IsDir():
		e.Kind = entryDir
		s.m.Entries = append(s.m.Entries, e)
		return s.dir(p, fi)
	case m.IsRegular():
		e.Kind = entryFile
		return s.file(e, fi)
	case m&fs.ModeSymlink != 0:
		return s.symlink(e)
	default:
		s.skip(p, modeKind(m)+", which is not checkpointed")
		return nil
	}
}

// symlink records the symlink e.Path with its target as it is.
func (s *saver) symlink(e manifestEntry) error {
	target, err := s.src.Readlink(e.Path)
	if err != nil {
		return fmt.Errorf("entry %q: %w", e.Path, err)
	}
	if target == "" || len(target) > maxTargetBytes {
		s.skip(e.Path, fmt.Sprintf("a symlink with a target of %d bytes", len(target)))
		return nil
	}
	e.Kind, e.Target = entrySymlink, target
	s.m.Entries = append(s.m.Entries, e)
	return nil
}

// file records the regular file e.Path, whose Lstat is fi: with the
// digest it had if its stat is what the last checkpoint saw, else read,
// hashed and put if the store lacks it.
func (s *saver) file(e manifestEntry, fi fs.FileInfo) error {
	st, ok := statOf(fi, "")
	if old, seen := s.prev[e.Path]; ok && seen && old.sameAs(st) {
		st.digest = old.digest
	} else {
		var err error
		if st, err = s.read(e.Path, fi); err != nil {
			return s.skipped(e.Path, err)
		}
	}
	e.Size, e.Digest = st.size, st.digest
	s.files[e.Path], s.known[st.digest] = st, true
	s.m.Entries = append(s.m.Entries, e)
	s.stats.Files++
	s.bytes += st.size
	return nil
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
		return fileStat{}, fmt.Errorf("entry %q: changed while it was checkpointed, twice: %w", p, err)
	}
	if err != nil {
		return fileStat{}, fmt.Errorf("entry %q: %w", p, err)
	}
	return st, nil
}

// hashPut hashes f from its start, then puts it from its start again if
// the namespace lacks its blob (the store checks it is what was hashed).
func (s *saver) hashPut(f *os.File) (string, int64, error) {
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
		return d, n, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", 0, err
	}
	if err := s.b.Put(s.ctx, s.ns, d, n, onlyReader{f}); err != nil {
		return "", 0, err
	}
	s.stats.Uploaded++
	s.stats.UploadedBytes += n
	return d, n, nil
}

// onlyReader hides an *os.File's WriterTo, so that io.CopyBuffer uses
// its buffer.
type onlyReader struct{ r io.Reader }

func (r onlyReader) Read(p []byte) (int, error) { return r.r.Read(p) }
