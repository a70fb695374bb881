package wiring

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/workspace"
)

// `agentbox run --workspace DIR` works on a copy of DIR, staged in the
// run's own store before the job exists; with --in-place it works in DIR
// itself, which the sandbox mounts as it is: the driver gives DIR to the
// sandbox's uid while it runs and back to DIR's owner after, through a
// handle on DIR that follows no link.

// personalWorkspaces is a driver whose sandboxes mount their workspace as
// it is: a person's directory, never held on a disk of the driver's own
// and copied back (which would replace the directory).
type personalWorkspaces struct{ sandbox.Driver }

func (d personalWorkspaces) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	spec.ManagedWorkspace = false
	return d.Driver.Create(ctx, spec)
}

// maxLinksOut bounds the symlinks leading out of an in-place workspace
// that a run reports.
const maxLinksOut = 20

// runDir resolves the directory of --workspace: an existing directory,
// the person's own links followed, that neither holds the data dir nor is
// in it (the sandbox would see agentbox's own files, or a copy would copy
// itself). In place, it needs root: only root can hand the directory to
// the sandbox's uid and back.
func (r RunRequest) runDir(dataDir string) (string, error) {
	if r.Workspace == "" {
		if r.InPlace {
			return "", errors.New("--in-place goes with --workspace DIR")
		}
		return "", nil
	}
	dir, err := filepath.Abs(r.Workspace)
	if err == nil {
		dir, err = filepath.EvalSymlinks(dir)
	}
	if err != nil {
		return "", fmt.Errorf("--workspace: %w", err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() || dir == "/" {
		return "", fmt.Errorf("--workspace %s: not a directory other than /", r.Workspace)
	}
	data, err := filepath.Abs(dataDir)
	if err != nil {
		return "", err
	}
	if within(data, dir) || within(dir, data) {
		return "", fmt.Errorf("--workspace %s: it holds, or is in, agentbox's data dir %s; choose another directory", r.Workspace, data)
	}
	if r.InPlace && os.Geteuid() != 0 {
		return "", errors.New("--in-place needs root: the sandbox runs as a uid of its own, and only root can hand the directory to it and back (or drop --in-place to work on a copy)")
	}
	return dir, nil
}

// within reports whether path is dir or beneath it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}

// stageCopy copies dir into the run's store for the job about to be
// submitted, and says what it left out.
func stageCopy(ctx context.Context, svc *jobs.Service, dir string) (*jobs.Staged, []string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("--workspace: %w", err)
	}
	defer root.Close()
	st, skipped, err := svc.StageCopy(ctx, root)
	if errors.Is(err, workspace.ErrTooLarge) {
		err = fmt.Errorf("--workspace %s: %w (AGENTBOX_MAX_UPLOAD bounds it)", dir, err)
	}
	return st, skipped, err
}

// linksOut lists the symlinks in dir that lead out of it, as the sandbox
// may have planted them: agentbox never follows them, and says so.
func linksOut(dir string) []string {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil
	}
	defer root.Close()
	var out []string
	_ = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		if target, err := root.Readlink(p); err == nil && workspace.LinkLeadsOut(p, target) {
			out = append(out, p+" -> "+target)
		}
		if len(out) >= maxLinksOut {
			return fs.SkipAll
		}
		return nil
	})
	return out
}

// describeLinks says what linksOut found, or "".
func describeLinks(links []string) string {
	if len(links) == 0 {
		return ""
	}
	return fmt.Sprintf("symlinks leading out of the directory (left as they are; agentbox follows none): %s", strings.Join(links, ", "))
}
