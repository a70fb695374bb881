package api

import (
	"net/http"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

// submit handles POST /v1/jobs. A replay of an Idempotency-Key with the
// same body answers 201 with the original job (and Idempotent-Replayed).
func (s *server) submit(w http.ResponseWriter, r *http.Request) error {
	j, created, err := s.submitJob(w, r)
	if err != nil {
		return err
	}
	if !created {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	links := s.links(j.ID)
	w.Header().Set("Location", links.Self)
	writeJSON(w, http.StatusCreated, wire.SubmitResponse{JobID: j.ID, Status: string(j.Status), Links: links})
	return nil
}

// submitJob submits the job of a request to POST /v1/jobs (or an alias):
// a JSON body, or a multipart one with a workspace.
func (s *server) submitJob(w http.ResponseWriter, r *http.Request) (store.Job, bool, error) {
	if isMultipart(r) {
		return s.submitMultipart(w, r)
	}
	var in wire.SubmitRequest
	if err := decodeJSON(w, r, s.cfg.MaxBodyBytes, &in); err != nil {
		return store.Job{}, false, err
	}
	return s.svc.Submit(r.Context(), submitRequest(in, idempotencyKey(r)))
}

// list handles GET /v1/jobs?status=&limit=&cursor=.
func (s *server) list(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit", 0)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	page, err := s.svc.List(r.Context(), store.ListOptions{
		Status: store.Status(q.Get("status")), Query: q.Get("q"), Limit: int(min(limit, 1<<20)), Cursor: q.Get("cursor"),
	})
	if err != nil {
		return err
	}
	out := wire.JobList{Jobs: make([]wire.Job, 0, len(page.Jobs)), NextCursor: page.NextCursor}
	for _, j := range page.Jobs {
		out.Jobs = append(out.Jobs, s.jobDTO(j))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// get handles GET /v1/jobs/{id}.
func (s *server) get(w http.ResponseWriter, r *http.Request) error {
	j, err := s.svc.Get(r.Context(), pathID(r))
	if err != nil {
		return err
	}
	out := s.jobDTO(j)
	if j.Status == store.StatusPending {
		if out.QueuePosition, err = s.svc.QueuePosition(r.Context(), j.ID); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// workers handles GET /v1/workers: the registered workers, by ID.
func (s *server) workers(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.svc.Workers(r.Context())
	if err != nil {
		return err
	}
	out := wire.WorkerList{Workers: make([]wire.Worker, 0, len(ws))}
	for _, x := range ws {
		out.Workers = append(out.Workers, workerDTO(x))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// cancel handles POST /v1/jobs/{id}/cancel: 202 with the job (a pending job
// is canceled at once; a running one when its worker stops it), 409 if the
// job already ended.
func (s *server) cancel(w http.ResponseWriter, r *http.Request) error {
	j, err := s.svc.Cancel(r.Context(), pathID(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, s.jobDTO(j))
	return nil
}

// legacySubmit handles the POST /schedule and /submit aliases of the
// original documents: the body of POST /v1/jobs, answered 200 {"job_id"}.
func (s *server) legacySubmit(w http.ResponseWriter, r *http.Request) error {
	j, _, err := s.submitJob(w, r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.LegacySubmitResponse{JobID: j.ID})
	return nil
}

// legacyStatus handles GET /status/{id}: the status, the artifacts URL once
// the job completed, and the error if it failed.
func (s *server) legacyStatus(w http.ResponseWriter, r *http.Request) error {
	j, err := s.svc.Get(r.Context(), pathID(r))
	if err != nil {
		return err
	}
	out := wire.LegacyStatus{Status: string(j.Status), Error: j.Error}
	if j.Status == store.StatusComplete {
		out.Result = s.links(j.ID).Artifacts
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
