package jobs_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
)

func TestDelete(t *testing.T) {
	e := newDataEnv(t)
	ctx := t.Context()
	for _, st := range []store.Status{store.StatusPending, store.StatusRunning} {
		id := e.job(st, 0)
		if _, err := e.svc.Delete(ctx, id); !errors.Is(err, jobs.ErrNotEnded) {
			t.Errorf("Delete of a %s job: %v, want ErrNotEnded", st, err)
		}
		if !exists(workspaceDir(e.dir, id)) || !e.get(id).DeletedAt.IsZero() {
			t.Errorf("Delete of a %s job touched it", st)
		}
	}
	if _, err := e.svc.Delete(ctx, "job_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Delete of an unknown job: %v, want ErrNotFound", err)
	}

	id := e.job(store.StatusComplete, time.Minute)
	j, err := e.svc.Delete(ctx, id)
	if err != nil || j.DeletedAt.IsZero() || j.Status != store.StatusComplete {
		t.Fatalf("Delete = %s deleted %v, %v; want complete, deleted", j.Status, j.DeletedAt, err)
	}
	if exists(workspaceDir(e.dir, id)) {
		t.Errorf("the workspace survived Delete")
	}
	// A removal a crash interrupted is finished by the next Delete.
	e.write(filepath.Join(workspaceDir(e.dir, id), "left"), "over")
	again, err := e.svc.Delete(ctx, id)
	if err != nil || !again.DeletedAt.Equal(j.DeletedAt) || exists(workspaceDir(e.dir, id)) {
		t.Errorf("second Delete = deleted %v, %v; want the first's time %v and no workspace", again.DeletedAt, err, j.DeletedAt)
	}
	if got := e.deletedEvents(id); !slices.Equal(got, []string{jobs.DeletedByAPI}) {
		t.Errorf("deleted events %v, want one, reason api", got)
	}
}

// TestDeleteWorkspaceNeverMade: a job that ended before its sandbox
// started has no workspace; deleting it marks it all the same.
func TestDeleteWorkspaceNeverMade(t *testing.T) {
	e := newDataEnv(t)
	id := e.job(store.StatusError, time.Minute)
	if err := os.RemoveAll(workspaceDir(e.dir, id)); err != nil {
		t.Fatal(err)
	}
	if j, err := e.svc.Delete(t.Context(), id); err != nil || j.DeletedAt.IsZero() {
		t.Errorf("Delete = %v, %v", j.DeletedAt, err)
	}
}
