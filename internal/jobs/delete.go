package jobs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
)

// Reasons of a deletion, as the deleted event (event.Deleted) gives them.
const (
	DeletedByAPI       = "api"       // DELETE /v1/jobs/{id}
	DeletedByRetention = "retention" // the janitor, AGENTBOX_RETENTION after the job ended
)

// ErrDeleted means a job's data (its workspace) was removed; its record and
// event log remain.
var ErrDeleted = errors.New("job data deleted")

// Delete removes an ended job's data from the host at once and marks the
// job deleted; its record and event log stay. A pending or running job is
// ErrNotEnded: cancel it first. Deleting a deleted job again succeeds, and
// removes whatever an interrupted or failed removal left.
func (s *Service) Delete(ctx context.Context, id string) (store.Job, error) {
	return s.deleteData(ctx, id, DeletedByAPI)
}

// deleteData marks the job deleted (so its files answer ErrDeleted from
// then on), logs the deleted event once, and removes its data. The job it
// returns has DeletedAt set if and only if the mark is stored, also when
// the removal then failed.
func (s *Service) deleteData(ctx context.Context, id, reason string) (store.Job, error) {
	j, err := s.store.GetJob(ctx, id)
	if err != nil {
		return store.Job{}, err
	}
	if err := deletable(j); err != nil {
		return store.Job{}, err
	}
	if j.DeletedAt.IsZero() {
		if j, err = s.markDeleted(ctx, id, reason); err != nil {
			return j, err
		}
	}
	if err := removeJobData(s.dataDir, id); err != nil {
		return j, fmt.Errorf("delete job %s: %w", id, err)
	}
	return j, nil
}

// markDeleted sets DeletedAt and appends the deleted event, unless another
// caller marked the job first.
func (s *Service) markDeleted(ctx context.Context, id, reason string) (store.Job, error) {
	first := false
	j, err := s.store.UpdateJob(ctx, id, func(j *store.Job) error {
		if err := deletable(*j); err != nil {
			return err
		}
		if j.DeletedAt.IsZero() {
			j.DeletedAt, first = time.Now().UTC(), true
		}
		return nil
	})
	if err != nil || !first {
		return j, err
	}
	if err := s.emit(ctx, id, event.Deleted{Reason: reason}); err != nil {
		return j, fmt.Errorf("delete job %s: %w", id, err)
	}
	return j, nil
}

// deletable refuses jobs that have not ended: their sandbox still writes
// to the data.
func deletable(j store.Job) error {
	if !j.Status.Final() {
		return fmt.Errorf("%w: job %s is %s; cancel it first, then delete it once it has ended", ErrNotEnded, j.ID, j.Status)
	}
	return nil
}

// removeJobData removes what the host keeps of a job under the data dir:
// its workspace. (A sandbox's state dir is removed when it is destroyed,
// before the job ends.)
func removeJobData(dataDir, id string) error {
	if id == "" || id == "." || id == ".." || filepath.Base(id) != id {
		return fmt.Errorf("remove job data: bad job id %q", id)
	}
	return removeEntry(workspacesDir(dataDir), id)
}

// workspacesDir holds the workspace of each job, named by its ID (see
// WorkspaceDir).
func workspacesDir(dataDir string) string { return filepath.Join(dataDir, "workspaces") }

// removeEntry removes name, an entry of the directory dir, with everything
// in it; an absent entry is no error. It never follows a symlink: an entry
// that is not a real directory (a symlink put in the workspace's place) is
// itself removed, not what it points to, and the tree is removed beneath a
// handle on dir (os.Root), with no path lookup that a link could divert
// outside it. Files the sandbox's uid owns need root, which the server is
// in production.
func removeEntry(dir, name string) error {
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove job data: %w", err)
	}
	defer root.Close()
	fi, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("remove job data: %w", err)
	case !fi.IsDir():
		err = root.Remove(name)
	default:
		err = root.RemoveAll(name)
	}
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("remove job data %s: %w (files of the sandbox's uid: run agentbox serve as root, or remove the directory as root)", filepath.Join(dir, name), err)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove job data %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}
