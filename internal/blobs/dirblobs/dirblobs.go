// Package dirblobs keeps blobs in a directory of the host, which every
// host of a cluster mounts (NFS, a shared volume) when they share it.
//
// Layout: <dir>/<ns>/objects/<first two hex digits>/<digest>, refs in
// <dir>/<ns>/refs/<name>. Every file is written under a temporary name
// in <dir>/.tmp and renamed into place once whole, so a reader on any
// host sees a blob or a ref whole or not at all, and a Put that fails
// makes no namespace appear in List. Only the server writes here (no
// sandbox mounts it), and every name is checked by the blobs package's
// rules before it becomes a path.
//
// Durability is the ref's: a ref is only set once what it names is
// durable. Put syncs nothing (a checkpoint puts thousands of blobs); SetRef
// first syncs the whole file system holding the store (syncfs), which
// makes every blob put before it durable, then writes the ref's file,
// syncs it, renames it into place and syncs the refs directory. A crash
// may lose blobs no ref names yet, or the latest ref (leaving the one
// before, whole), never a blob a ref names.
package dirblobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/blobs"
)

// Store is a blobs.Store over a directory.
type Store struct{ dir string }

var _ blobs.Store = (*Store)(nil)

// New returns the store over dir, made (0700) if missing.
func New(dir string) (*Store, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("blob directory %q: want an absolute path", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("blob directory: %w", err)
	}
	s := &Store{dir: dir}
	s.removeStale()
	return s, nil
}

// staleTemp is the age past which a temporary file, or a removed
// namespace not yet deleted, is what a crashed process left: a Put under
// way on another host writes its file for less.
const staleTemp = time.Hour

// removeStale removes what crashed processes left in the store: files in
// .tmp and .trash-… directories older than staleTemp.
func (s *Store) removeStale() {
	old := func(fi fs.FileInfo, err error) bool { return err == nil && time.Since(fi.ModTime()) > staleTemp }
	if ents, err := os.ReadDir(filepath.Join(s.dir, ".tmp")); err == nil {
		for _, e := range ents {
			if old(e.Info()) {
				_ = os.Remove(filepath.Join(s.dir, ".tmp", e.Name()))
			}
		}
	}
	ents, _ := os.ReadDir(s.dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".trash-") && old(e.Info()) {
			_ = os.RemoveAll(filepath.Join(s.dir, e.Name()))
		}
	}
}

// Dir is the directory the store keeps its namespaces in.
func (s *Store) Dir() string { return s.dir }

func (s *Store) object(ns, digest string) (string, error) {
	if err := errors.Join(blobs.CheckNS(ns), blobs.CheckDigest(digest)); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, ns, "objects", digest[:2], digest), nil
}

func (s *Store) ref(ns, name string) (string, error) {
	if err := errors.Join(blobs.CheckNS(ns), blobs.CheckRef(name)); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, ns, "refs", name), nil
}

// Has reports whether the blob's file is there.
func (s *Store) Has(_ context.Context, ns, digest string) (bool, error) {
	p, err := s.object(ns, digest)
	if err != nil {
		return false, err
	}
	_, err = os.Lstat(p)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, fmt.Errorf("blob %s: %w", digest, err)
}

// Put writes the blob under a temporary name, checks it, and renames it
// into place.
func (s *Store) Put(ctx context.Context, ns, digest string, size int64, r io.Reader) error {
	p, err := s.object(ns, digest)
	if err != nil {
		return err
	}
	if ok, err := s.Has(ctx, ns, digest); err != nil || ok {
		return err
	}
	return s.write(ctx, p, false, func(w io.Writer) error {
		v := blobs.NewVerifier(r, digest, size)
		if _, err := io.Copy(w, readerCtx{ctx, v}); err != nil {
			return err
		}
		return v.Check()
	})
}

// write makes the file p with what fill writes: in a temporary file,
// then renamed to p, whose directories are made only then. durable syncs
// the file before the rename and p's directory after.
func (s *Store) write(ctx context.Context, p string, durable bool, fill func(w io.Writer) error) error {
	tmpDir := filepath.Join(s.dir, ".tmp")
	if err := os.MkdirAll(tmpDir, 0o700); err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	f, err := os.CreateTemp(tmpDir, "put-")
	if err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	defer os.Remove(f.Name()) // gone once renamed; else what a failure left
	err = fill(f)
	if err == nil {
		err = ctx.Err()
	}
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.MkdirAll(filepath.Dir(p), 0o700)
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err == nil && durable {
		err = syncDir(filepath.Dir(p))
	}
	if err != nil {
		return fmt.Errorf("put %s: %w", filepath.Base(p), err)
	}
	return nil
}

// syncDir syncs the directory dir (its entries).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// syncAll makes everything written to the file system holding the store
// durable: the blobs a ref about to be set names.
func (s *Store) syncAll() error {
	d, err := os.Open(s.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Syncfs(int(d.Fd()))
}

// Open opens the blob's file.
func (s *Store) Open(_ context.Context, ns, digest string) (io.ReadCloser, int64, error) {
	p, err := s.object(ns, digest)
	if err != nil {
		return nil, 0, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("blob %s of %s: %w", digest, ns, blobs.ErrNotFound)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("blob %s: %w", digest, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("blob %s: %w", digest, err)
	}
	return f, fi.Size(), nil
}

// SetRef makes every blob put so far durable, then writes the ref's file
// whole and durably.
func (s *Store) SetRef(ctx context.Context, ns, name string, value []byte) error {
	p, err := s.ref(ns, name)
	if err != nil {
		return err
	}
	if len(value) > blobs.MaxRef {
		return fmt.Errorf("ref %s: %d bytes, over %d", name, len(value), blobs.MaxRef)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("ref %s: %w", name, err)
	}
	if err := s.syncAll(); err != nil {
		return fmt.Errorf("ref %s: sync the blobs: %w", name, err)
	}
	return s.write(ctx, p, true, func(w io.Writer) error {
		_, err := w.Write(value)
		return err
	})
}

// Ref reads the ref's file.
func (s *Store) Ref(_ context.Context, ns, name string) ([]byte, error) {
	p, err := s.ref(ns, name)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("ref %s of %s: %w", name, ns, blobs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("ref %s: %w", name, err)
	}
	return b, nil
}

// Remove renames the namespace's directory out of sight first, so that
// it is gone at once for every host, then removes it.
func (s *Store) Remove(_ context.Context, ns string) error {
	if err := blobs.CheckNS(ns); err != nil {
		return err
	}
	trash, err := os.MkdirTemp(s.dir, ".trash-")
	if err != nil {
		return fmt.Errorf("remove %s: %w", ns, err)
	}
	defer os.RemoveAll(trash)
	err = os.Rename(filepath.Join(s.dir, ns), filepath.Join(trash, ns))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", ns, err)
	}
	return nil
}

// List lists the namespaces' directories.
func (s *Store) List(context.Context) ([]string, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list blob namespaces: %w", err)
	}
	var ns []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			ns = append(ns, e.Name())
		}
	}
	return ns, nil
}

// readerCtx stops a long copy when ctx ends.
type readerCtx struct {
	ctx context.Context
	r   io.Reader
}

func (r readerCtx) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
