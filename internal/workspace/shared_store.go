package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox/agentbox/internal/artifact"
	"github.com/agentbox/agentbox/internal/blobs"
)

// The workspace.Store of a Shared: a workspace is the latest checkpoint
// of the job's TreeWorkspace, read through its materialization.

// Prepare materializes the workspace's latest checkpoint, saving an empty
// one at step 0 first if there is none. What a sandbox writes into the
// directory is not kept: checkpoints are saved from the worker's own tree.
func (s *Shared) Prepare(ctx context.Context, id string) (string, error) {
	dir, _, err := s.Materialize(ctx, id, TreeWorkspace)
	if errors.Is(err, ErrNotFound) {
		err = s.make(ctx, id, func(dir string) error { return os.Mkdir(dir, 0o755) })
		if err == nil {
			dir, _, err = s.Materialize(ctx, id, TreeWorkspace)
		}
	}
	if err != nil {
		return "", fmt.Errorf("prepare workspace: %w", err)
	}
	return dir, nil
}

// Unpack unpacks the archive into a temporary directory and saves it as
// the workspace's checkpoint at step 0; ErrExists if it has one already.
func (s *Shared) Unpack(ctx context.Context, id string, r io.Reader, f Format, lim Limits) error {
	return s.make(ctx, id, func(dir string) error { return Unpack(ctx, dir, r, f, lim) })
}

// Copy copies src into a temporary directory and saves it as the
// workspace's checkpoint at step 0; ErrExists if it has one already.
func (s *Shared) Copy(ctx context.Context, id string, src *os.Root, lim Limits) (skipped []string, err error) {
	err = s.make(ctx, id, func(dir string) error {
		skipped, err = Copy(ctx, src, dir, lim)
		return err
	})
	return skipped, err
}

// make saves the tree fill makes in a new directory (which must not
// exist) as the workspace's checkpoint at step 0, unless it has one.
func (s *Shared) make(ctx context.Context, id string, fill func(dir string) error) error {
	if err := blobs.CheckNS(id); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if ok, err := s.Exists(ctx, id); err != nil || ok {
		return errors.Join(err, fmt.Errorf("workspace %s: %w", id, ErrExists))
	}
	if err := os.MkdirAll(s.cache, 0o700); err != nil {
		return fmt.Errorf("make workspace: %w", err)
	}
	tmp, err := os.MkdirTemp(s.cache, ".make-")
	if err != nil {
		return fmt.Errorf("make workspace: %w", err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "ws")
	if err := fill(dir); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("make workspace: %w", err)
	}
	defer root.Close()
	_, _, err = s.Save(ctx, id, TreeWorkspace, root, nil, Checkpoint{At: time.Now().UTC()})
	return err
}

// Open opens a root over the workspace's materialization; ErrNotFound if
// it has no checkpoint.
// The materialization may be replaced between the two (by a newer
// checkpoint's, made for another reader or by another process sharing
// the cache): then it is made again.
func (s *Shared) Open(ctx context.Context, id string) (*os.Root, error) {
	for try := 1; ; try++ {
		dir, _, err := s.Materialize(ctx, id, TreeWorkspace)
		if err != nil {
			return nil, fmt.Errorf("open workspace %s: %w", id, err)
		}
		root, err := os.OpenRoot(dir)
		if errors.Is(err, fs.ErrNotExist) && try < openTries {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("open workspace %s: %w", id, err)
		}
		return root, nil
	}
}

// openTries is how many times Open materializes a workspace whose
// materialization is replaced before it opens it.
const openTries = 5

// Zip zips the workspace's materialization.
func (s *Shared) Zip(ctx context.Context, id string, w io.Writer, opts artifact.Options) (artifact.Report, error) {
	root, err := s.Open(ctx, id)
	if err != nil {
		return artifact.Report{}, err
	}
	defer root.Close()
	return opts.Write(w, root)
}

// Exists reports whether the workspace has a checkpoint.
func (s *Shared) Exists(ctx context.Context, id string) (bool, error) {
	_, err := s.Latest(ctx, id, TreeWorkspace)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// Remove removes the job's namespace, every tree's checkpoints, and its
// materializations on this host.
func (s *Shared) Remove(ctx context.Context, id string) error {
	if err := blobs.CheckNS(id); err != nil {
		return fmt.Errorf("remove workspace: %w", err)
	}
	if err := s.blobs.Remove(ctx, id); err != nil {
		return fmt.Errorf("remove workspace %s: %w", id, err)
	}
	lock := s.lock(id)
	lock.Lock()
	defer lock.Unlock()
	return removeTree(filepath.Join(s.cache, id))
}

// List lists the blob store's namespaces.
func (s *Shared) List(ctx context.Context) ([]string, error) {
	ns, err := s.blobs.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	return ns, nil
}
