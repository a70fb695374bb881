// Package workspace owns workspaces: the directory tree a job's sandbox
// works in, kept after the job ends for its files and artifacts.zip.
// Everything else reaches a workspace through a Store and the workspace's
// ID (a job's ID, a chat session's name); no other package builds a
// workspace's path. Local is the store of this host's data dir.
//
// A workspace is written by untrusted code, so reading one never follows a
// link out of it: Open gives an os.Root, and Zip reads through one.
package workspace

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/agentbox/agentbox/internal/artifact"
)

// ErrNotFound means the store holds no workspace of that ID.
var ErrNotFound = errors.New("no such workspace")

// Store keeps workspaces, each named by an ID made of one path element
// (no '/', not "." or ".."). A store that keeps them off this host (a blob
// store shared by several hosts) implements the same contract: Prepare
// then yields a directory of this host for the local sandbox driver, and
// Open a root over a copy of the workspace.
type Store interface {
	// Prepare makes workspace id if it does not exist yet and returns what
	// a local sandbox driver mounts at /workspace: a host directory
	// (sandbox.Binding.WorkspaceDir).
	Prepare(ctx context.Context, id string) (string, error)
	// Unpack makes workspace id from the archive r in format f within lim,
	// or fails leaving nothing behind: ErrExists if the workspace is there
	// already, ErrTooLarge or ErrBadArchive (saying why) for an archive it
	// does not take. No entry is written outside the workspace, nor through
	// a link.
	Unpack(ctx context.Context, id string, r io.Reader, f Format, lim Limits) error
	// Copy makes workspace id a copy of the tree under src within lim's
	// bytes and entries, or fails leaving nothing behind: ErrExists if the
	// workspace is there already, ErrTooLarge. No link in src is followed;
	// symlinks are copied as they are. What it does not copy (FIFOs,
	// sockets, devices) skipped names, with why.
	Copy(ctx context.Context, id string, src *os.Root, lim Limits) (skipped []string, err error)
	// Open opens workspace id for reading; ErrNotFound if there is none.
	// Nothing read through the root reaches outside the workspace: not
	// "..", an absolute path, nor a symlink. The caller closes it.
	Open(ctx context.Context, id string) (*os.Root, error)
	// Zip writes workspace id to w as a zip bounded by opts (see package
	// artifact) and reports what it left out or renamed; ErrNotFound, with
	// nothing written, if there is none. Any other error means the zip is
	// incomplete and must not be taken for whole.
	Zip(ctx context.Context, id string, w io.Writer, opts artifact.Options) (artifact.Report, error)
	// Exists reports whether the store holds workspace id.
	Exists(ctx context.Context, id string) (bool, error)
	// Remove removes workspace id with everything in it, following no
	// link; removing an absent workspace is no error.
	Remove(ctx context.Context, id string) error
	// List returns the IDs of the workspaces the store holds, in no
	// particular order.
	List(ctx context.Context) ([]string, error)
}
