package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/blobs"
)

// Shared is a workspace.Store whose workspaces live in a blob store, read
// through a cache of materialized checkpoints on this host.
type Shared struct {
	blobs blobs.Store
	cache string // <cache>/<id>/<tree>/<manifest digest>: a materialized checkpoint

	mu    sync.Mutex
	locks map[string]*sync.Mutex // by job: one Materialize at a time
	swept time.Time              // the last sweep of idle materializations
}

var _ Store = (*Shared)(nil)

// NewShared returns the store of workspaces kept in b, materialized under
// cacheDir.
func NewShared(b blobs.Store, cacheDir string) *Shared {
	return &Shared{blobs: b, cache: cacheDir, locks: map[string]*sync.Mutex{}}
}

// Save checkpoints the tree under src as `tree` of job id: reads what changed
// since prev (nil: all), puts the blobs the store lacks, puts the trees of
// the directories whose listing changed, then sets the ref `tree` to c
// (c.Manifest/Files/Bytes filled in; c.Manifest names the root's tree).
// src is hostile (a sandbox writes it): no link followed, entries checked
// to be what their directory listed (like workspace.Copy).
func (s *Shared) Save(ctx context.Context, id, tree string, src *os.Root, prev *Snapshot, c Checkpoint) (*Snapshot, SaveStats, error) {
	begin := time.Now()
	if err := errors.Join(blobs.CheckNS(id), blobs.CheckRef(tree)); err != nil {
		return nil, SaveStats{}, fmt.Errorf("checkpoint: %w", err)
	}
	sv := newSaver(ctx, s.blobs, id, src, prev)
	snap, err := s.save(sv, tree, c)
	sv.stats.Took, sv.stats.Bytes, sv.stats.Skipped = time.Since(begin), sv.bytes, sv.leftOut.list()
	if err != nil {
		return nil, sv.stats, fmt.Errorf("checkpoint %s of %s: %w", tree, id, err)
	}
	return snap, sv.stats, nil
}

func (s *Shared) save(sv *saver, tree string, c Checkpoint) (*Snapshot, error) {
	fi, err := sv.src.Lstat(".")
	if err != nil {
		return nil, err
	}
	d, err := sv.dir(".", fi)
	if err == nil {
		err = sv.flush()
	}
	if err != nil {
		return nil, err
	}
	c.Manifest, c.Files, c.Bytes = d, sv.stats.Files, sv.bytes
	ref, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	if err := s.blobs.SetRef(sv.ctx, sv.ns, tree, ref); err != nil {
		return nil, err
	}
	return &Snapshot{ns: sv.ns, manifest: d, files: sv.files, trees: sv.trees}, nil
}

// Latest returns the ref of tree of job id; an error wrapping ErrNotFound if none.
func (s *Shared) Latest(ctx context.Context, id, tree string) (Checkpoint, error) {
	return latest(ctx, s.blobs, id, tree)
}

// Restore makes dir, which must not exist, the tree of checkpoint c of job
// id (atomically, as workspace.Copy builds a tree), and returns the Snapshot
// of what it wrote (so the next Save uploads only what changes after).
func (s *Shared) Restore(ctx context.Context, id string, c Checkpoint, dir string) (*Snapshot, error) {
	if err := blobs.CheckDigest(c.Manifest); err != nil {
		return nil, fmt.Errorf("restore %s: %w", id, err)
	}
	t, err := readTrees(ctx, s.blobs, id, c.Manifest)
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", id, err)
	}
	var files map[string]fileStat
	err = build(dir, tempRestore, func(tmp string) (err error) {
		files, err = restoreInto(ctx, s.blobs, id, t.entries, tmp)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", id, err)
	}
	return &Snapshot{ns: id, manifest: c.Manifest, files: files, trees: t.trees}, nil
}

// Materialize returns a directory of this host holding the latest checkpoint
// of tree of job id (cached under cacheDir by manifest digest, made once,
// read-only for callers), and that checkpoint.
func (s *Shared) Materialize(ctx context.Context, id, tree string) (string, Checkpoint, error) {
	c, err := s.Latest(ctx, id, tree)
	if err != nil {
		return "", Checkpoint{}, err
	}
	s.sweep()
	lock := s.lock(id)
	lock.Lock()
	defer lock.Unlock()
	defer s.used(id)
	// Each tree has its own directory: materializing one never removes
	// another's (a diff needs the workspace and the git dir at once).
	jobDir := filepath.Join(s.cache, id, tree)
	dir := filepath.Join(jobDir, c.Manifest)
	if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
		return dir, c, nil
	}
	if err := os.MkdirAll(jobDir, 0o700); err != nil {
		return "", Checkpoint{}, fmt.Errorf("materialize %s: %w", id, err)
	}
	// Another process may make the same directory at once: either is whole.
	if _, err := s.Restore(ctx, id, c, dir); err != nil && !errors.Is(err, ErrExists) {
		return "", Checkpoint{}, err
	}
	// The others are only kept for their readers: failing to remove them
	// (another process removing the same ones at once) fails no read.
	_ = removeOthers(jobDir, c.Manifest)
	return dir, c, nil
}

// lock returns the mutex of job id's materializations.
func (s *Shared) lock(id string) *sync.Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.locks[id]
	if l == nil {
		l = &sync.Mutex{}
		s.locks[id] = l
	}
	return l
}

// tempRestore is the kind of the directories Restore makes trees in.
const tempRestore = "restore"

// restoreInto writes entries beneath the new, empty directory tmp, each
// file's blob checked against its digest as it is written, and returns
// the stats of the files it wrote.
func restoreInto(ctx context.Context, b blobs.Store, ns string, entries []pathEntry, tmp string) (map[string]fileStat, error) {
	root, err := os.OpenRoot(tmp)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	u := newUnpacker(ctx, root, Limits{MaxBytes: 1 << 62, MaxEntries: maxCheckpointEntries})
	defer u.closeDir()
	for _, e := range entries {
		if err := restoreEntry(ctx, b, ns, u, e); err != nil {
			return nil, err
		}
	}
	if err := u.finish(); err != nil {
		return nil, err
	}
	files := map[string]fileStat{}
	for _, e := range entries {
		if e.Kind != entryFile {
			continue
		}
		fi, err := root.Lstat(e.path)
		if err != nil {
			return nil, err
		}
		if st, ok := statOf(fi, e.Digest); ok {
			files[e.path] = st
		}
	}
	return files, os.Chmod(tmp, 0o755)
}

// restoreEntry writes the entry e through u.
func restoreEntry(ctx context.Context, b blobs.Store, ns string, u *unpacker, e pathEntry) error {
	mtime := time.Unix(0, e.MTime)
	switch e.Kind {
	case entryDir:
		return u.mkdir(e.path, e.Mode, mtime)
	case entrySymlink:
		return u.link(e.path, e.Target)
	}
	rc, _, err := b.Open(ctx, ns, e.Digest)
	if err != nil {
		return fmt.Errorf("entry %q: %w", e.path, err)
	}
	defer rc.Close()
	v := blobs.NewVerifier(rc, e.Digest, e.Size)
	r := &blobReader{r: v}
	err = u.writeFile(e.path, e.Mode, mtime, r)
	if r.err != nil {
		err = r.err
	} else if err == nil {
		err = v.Check()
	}
	if err != nil {
		return fmt.Errorf("entry %q: %w", e.path, err)
	}
	return nil
}

// blobReader keeps the error reading a blob gave: the unpacker reports a
// reader's error as the archive's fault (ErrBadArchive, a client's 400),
// but a blob of a checkpoint that does not match its digest (ErrCorrupt)
// or went missing (ErrNotFound) is the store's.
type blobReader struct {
	r   io.Reader
	err error
}

func (b *blobReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}
