package api

import (
	"context"
	"net/http"

	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

// deleter removes an ended job's data, keeping its record and log (see
// jobs.Service.Delete). It is an ability of the Service found by type
// assertion, so that Services without it still build.
type deleter interface {
	Delete(ctx context.Context, id string) (store.Job, error)
}

var _ deleter = (*jobs.Service)(nil)

// deleteJob handles DELETE /v1/jobs/{id}: the ended job's workspace is
// removed at once and the job, marked with deleted_at, is answered 200; its
// record and events stay, and its files and artifacts answer 410 from then
// on. Deleting again answers the same. A pending or running job is 409
// not_ended: cancel it first.
func (s *server) deleteJob(w http.ResponseWriter, r *http.Request) error {
	d, ok := s.svc.(deleter)
	if !ok {
		return errorf(http.StatusMethodNotAllowed, wire.CodeMethodNotAllowed, "this server does not delete jobs")
	}
	j, err := d.Delete(r.Context(), pathID(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.jobDTO(j))
	return nil
}
