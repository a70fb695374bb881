package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentbox/agentbox/internal/artifact"
)

// Local is the Store of workspaces kept as directories of this host.
type Local struct {
	dir string // holds one entry per workspace, named by its ID
	sub string // "" or, in a sessions store, the workspace's name in its entry
	// inPlace, in a store made by NewInPlace, is the name in dir of the
	// one directory every ID names.
	inPlace string
}

var _ Store = (*Local)(nil)

// NewLocal returns the store of the job workspaces under the data dir
// dataDir: the workspace of job id is <dataDir>/workspaces/<id>, as in
// every release before, so existing data dirs keep working.
func NewLocal(dataDir string) *Local {
	return &Local{dir: filepath.Join(dataDir, "workspaces")}
}

// NewSessions returns the store of chat sessions' workspaces under dir:
// the workspace of session name is <dir>/<name>/workspace, beside the
// session's own files in <dir>/<name>.
func NewSessions(dir string) *Local {
	return &Local{dir: dir, sub: "workspace"}
}

// NewInPlace returns a store whose every workspace is the directory dir
// itself, a person's own: what `agentbox run --in-place` works in, for
// its one job. It never removes dir (Remove fails), and List lists
// nothing.
func NewInPlace(dir string) *Local {
	dir = filepath.Clean(dir)
	return &Local{dir: filepath.Dir(dir), inPlace: filepath.Base(dir)}
}

// Dir is the host directory of workspace id, whether or not it exists:
// for messages and tests. Code that reads or writes the workspace goes
// through the Store's methods.
func (l *Local) Dir(id string) string {
	if l.inPlace != "" {
		return filepath.Join(l.dir, l.inPlace)
	}
	return filepath.Join(l.dir, id, l.sub)
}

// entry splits workspace id's directory into the directory that holds it
// and its name there, refusing IDs that are not one path element.
func (l *Local) entry(id string) (parent, name string, err error) {
	if id == "" || id == "." || id == ".." || filepath.Base(id) != id {
		return "", "", fmt.Errorf("workspace: bad id %q", id)
	}
	if l.inPlace != "" {
		return l.dir, l.inPlace, nil
	}
	if l.sub == "" {
		return l.dir, id, nil
	}
	return filepath.Join(l.dir, id), l.sub, nil
}

// Prepare makes the workspace's directory (and its parents) and returns it.
func (l *Local) Prepare(_ context.Context, id string) (string, error) {
	if _, _, err := l.entry(id); err != nil {
		return "", err
	}
	dir := l.Dir(id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("prepare workspace: %w", err)
	}
	// The driver mounts the path and hands its tree to the sandbox's uid:
	// it must be the directory itself, not a link to another.
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("prepare workspace: %s is not a directory of its own (%v)", dir, err)
	}
	return dir, nil
}

// Open opens the workspace's directory as an os.Root. The directory is
// opened beneath a root over the one holding it, and must be a real
// directory: a symlink put in its place is not followed.
func (l *Local) Open(_ context.Context, id string) (*os.Root, error) {
	parent, name, err := l.entry(id)
	if err != nil {
		return nil, err
	}
	pr, err := os.OpenRoot(parent)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", id, notFound(err))
	}
	defer pr.Close()
	fi, err := pr.Lstat(name)
	if err == nil && !fi.IsDir() {
		err = ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", id, notFound(err))
	}
	root, err := pr.OpenRoot(name)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", id, notFound(err))
	}
	return root, nil
}

// Exists reports whether the workspace's directory is there (a real
// directory, as Open wants it).
func (l *Local) Exists(ctx context.Context, id string) (bool, error) {
	root, err := l.Open(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	root.Close()
	return true, nil
}

// Zip zips the workspace through an os.Root over it.
func (l *Local) Zip(ctx context.Context, id string, w io.Writer, opts artifact.Options) (artifact.Report, error) {
	root, err := l.Open(ctx, id)
	if err != nil {
		return artifact.Report{}, err
	}
	defer root.Close()
	return opts.Write(w, root)
}

// Remove removes the workspace's entry with everything in it. It never
// follows a symlink: an entry that is not a real directory (a symlink put
// in the workspace's place) is itself removed, not what it points to, and
// the tree is removed beneath a handle on the directory holding it
// (os.Root), with no path lookup that a link could divert outside it.
// Files of the sandbox's uid need root, which the server is in production.
func (l *Local) Remove(_ context.Context, id string) error {
	parent, name, err := l.entry(id)
	if err != nil {
		return err
	}
	if l.inPlace != "" {
		return fmt.Errorf("remove workspace: %s is a directory of yours, never removed", l.Dir(id))
	}
	root, err := os.OpenRoot(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove workspace: %w", err)
	}
	defer root.Close()
	fi, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("remove workspace: %w", err)
	case !fi.IsDir():
		err = root.Remove(name)
	default:
		err = root.RemoveAll(name)
	}
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("remove workspace %s: %w (files of the sandbox's uid: run agentbox serve as root, or remove the directory as root)", l.Dir(id), err)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove workspace %s: %w", l.Dir(id), err)
	}
	return nil
}

// List returns the names of the entries of the store's directory, but
// those starting with '.' (no ID does); in a sessions store, only those
// that hold a workspace.
func (l *Local) List(context.Context) ([]string, error) {
	if l.inPlace != "" {
		return nil, nil
	}
	entries, err := os.ReadDir(l.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || l.sub != "" && !present(l.Dir(e.Name())) {
			continue
		}
		ids = append(ids, e.Name())
	}
	return ids, nil
}

func present(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// notFound turns the error of an absent workspace (or of an absent
// directory holding it) into ErrNotFound and leaves other errors be.
func notFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return ErrNotFound
	}
	return err
}

// Unpack makes workspace id from an archive (see the package function
// Unpack); ErrExists if the workspace is there already.
func (l *Local) Unpack(ctx context.Context, id string, r io.Reader, f Format, lim Limits) error {
	return l.make(id, func(dir string) error { return Unpack(ctx, dir, r, f, lim) })
}

// Copy makes workspace id a copy of the tree under src (see the package
// function Copy); ErrExists if the workspace is there already.
func (l *Local) Copy(ctx context.Context, id string, src *os.Root, lim Limits) (skipped []string, err error) {
	err = l.make(id, func(dir string) error {
		skipped, err = Copy(ctx, src, dir, lim)
		return err
	})
	return skipped, err
}

// make makes workspace id's directory with fill, making the directory
// that holds it first; a session's directory made for nothing is removed.
func (l *Local) make(id string, fill func(dir string) error) error {
	parent, _, err := l.entry(id)
	if err != nil {
		return err
	}
	made := !present(parent)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("make workspace: %w", err)
	}
	err = fill(l.Dir(id))
	if err != nil && made && l.sub != "" {
		os.Remove(parent) // kept if not empty
	}
	return err
}

// partials are the names of what Unpack and Copy make beside a workspace
// while they work, left behind only by a crash.
var partials = []string{".*." + tempUnpack + "-*", ".*." + tempCopy + "-*", zipSpool}

// RemovePartial removes what an Unpack or a Copy that a crash cut short
// left beside the workspaces, and returns the paths it removed. Call it
// when no Unpack or Copy of the store is under way: at a server's start.
func (l *Local) RemovePartial(context.Context) ([]string, error) {
	if l.inPlace != "" {
		return nil, nil
	}
	dirs := []string{l.dir}
	if l.sub != "" {
		ids, err := l.List(context.Background())
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			dirs = append(dirs, filepath.Join(l.dir, id))
		}
	}
	var removed []string
	var errs []error
	for _, dir := range dirs {
		r, err := removePartial(dir)
		removed, errs = append(removed, r...), append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// removePartial removes the partials in dir.
func removePartial(dir string) ([]string, error) {
	var removed []string
	var errs []error
	for _, pattern := range partials {
		paths, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, p := range paths {
			if err := removeTree(p); err != nil {
				errs = append(errs, err)
				continue
			}
			removed = append(removed, p)
		}
	}
	return removed, errors.Join(errs...)
}
