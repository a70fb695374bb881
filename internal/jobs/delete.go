package jobs

import (
	"context"
	"errors"
	"fmt"
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
	if err := s.removeData(ctx, id); err != nil {
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

// removeData removes what the host keeps of a job: its workspace, a
// snapshot of it taken while it ran (once no request reads it), its
// images and its git dir. (A sandbox's state dir is removed when it is
// destroyed, before the job ends.)
func (s *Service) removeData(ctx context.Context, id string) error {
	s.dropSnapshot(id)
	if err := s.ws.Remove(ctx, id); err != nil {
		return err
	}
	if s.media != nil {
		if err := s.media.Remove(id); err != nil {
			return err
		}
	}
	if s.repos != nil {
		return s.repos.remove(id)
	}
	return nil
}
