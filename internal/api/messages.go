package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

// replier continues a job's conversation (see jobs.Service.Reply). It is
// an ability of the Service found by type assertion, so that Services
// without it still build.
type replier interface {
	Reply(ctx context.Context, id, text string) (store.Job, store.Event, error)
}

var _ replier = (*jobs.Service)(nil)

// reply handles POST /v1/jobs/{id}/messages: 202 with the job. On an ended
// job the message starts its next turn (the job is pending again); on a
// pending or running one the agent reads it at its next step boundary.
// Location is the job's events from the message on. 400 for an empty,
// oversized or non-UTF-8 message, or a server whose agent holds no
// conversation (the shell agent); 410 for a job whose data was deleted.
func (s *server) reply(w http.ResponseWriter, r *http.Request) error {
	rp, ok := s.svc.(replier)
	if !ok {
		return errorf(http.StatusMethodNotAllowed, wire.CodeMethodNotAllowed, "this server does not take messages")
	}
	var in wire.MessageRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, &in); err != nil {
		return err
	}
	j, ev, err := rp.Reply(r.Context(), pathID(r), in.Message)
	if err != nil {
		return err
	}
	w.Header().Set("Location", s.links(j.ID).Events+"?after="+strconv.FormatInt(ev.Seq-1, 10))
	writeJSON(w, http.StatusAccepted, s.jobDTO(j))
	return nil
}
