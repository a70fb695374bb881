package jobs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/workspace"
)

// With a service whose workspace store is a workspace.Shared (the blob
// store the cluster shares), an ended job's workspace, files, zip and diff
// come from its checkpoints on every replica: the workspace's, which its
// worker took once the sandbox was gone, and its git dir's.

// shared returns the service's workspace store if it is a Shared one.
func (s *Service) shared() *workspace.Shared {
	sh, _ := s.ws.(*workspace.Shared)
	return sh
}

// diffDirs returns the git dir and the workspace directory ended job j's
// diff is made of, and what to call once it is made. From a Shared store
// they are the job's checkpoints as materialized on this host, read-only:
// git writes the tree it records into a git dir of its own, borrowing the
// checkpoint's objects.
func (s *Service) diffDirs(ctx context.Context, j store.Job) (gitDir, workDir string, done func(), err error) {
	sh := s.shared()
	if sh == nil {
		dir, err := s.ws.Prepare(ctx, j.ID)
		return s.repos.GitDir(j.ID), dir, func() {}, err
	}
	workDir, _, err = sh.Materialize(ctx, j.ID, workspace.TreeWorkspace)
	if err != nil {
		return "", "", nil, s.noDiff(j, err)
	}
	base, _, err := sh.Materialize(ctx, j.ID, workspace.TreeGit)
	if err != nil {
		return "", "", nil, s.noDiff(j, err)
	}
	// In the data dir, not /tmp: git writes the workspace's tree there.
	if err := os.MkdirAll(s.repos.Dir, 0o700); err != nil {
		return "", "", nil, fmt.Errorf("diff: %w", err)
	}
	tmp, err := os.MkdirTemp(s.repos.Dir, "tmp-diff-")
	if err != nil {
		return "", "", nil, fmt.Errorf("diff: %w", err)
	}
	done = func() { os.RemoveAll(tmp) }
	gitDir = filepath.Join(tmp, "git")
	if err := s.borrow(ctx, gitDir, base); err != nil {
		done()
		return "", "", nil, err
	}
	return gitDir, workDir, done, nil
}

// borrow makes gitDir a bare repository whose objects are base's too.
func (s *Service) borrow(ctx context.Context, gitDir, base string) error {
	if err := s.repos.Host.InitBare(ctx, gitDir); err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	alt := filepath.Join(gitDir, "objects", "info", "alternates")
	if err := os.WriteFile(alt, []byte(filepath.Join(base, "objects")+"\n"), 0o600); err != nil {
		return fmt.Errorf("diff: %w", err)
	}
	return nil
}

// noDiff says why a job has no checkpoint to take a diff of.
func (s *Service) noDiff(j store.Job, err error) error {
	if noCheckpoint(err) {
		return fmt.Errorf("%w: job %s has no checkpoint of its workspace and git dir: %w", ErrNoDiff, j.ID, err)
	}
	return fmt.Errorf("diff: %w", err)
}
