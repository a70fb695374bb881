package api

import (
	"net/http"

	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/wire"
)

// maxPolicyBytes bounds the body of PATCH /v1/jobs/{id}/network: 256
// entries of 300 bytes, with room for methods.
const maxPolicyBytes = 256 << 10

// networkChecker is an optional ability of a Service: it checks a job's
// policy on its own, so that a multipart submission is refused before its
// upload is read (Submit checks it anyway).
type networkChecker interface {
	CheckNetwork(p egress.Policy) (egress.Policy, error)
}

// network handles GET /v1/jobs/{id}/network: the policy in force and a
// summary per host of the job's network events.
func (s *server) network(w http.ResponseWriter, r *http.Request) error {
	sum, err := s.svc.Network(r.Context(), pathID(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, networkDTO(sum))
	return nil
}

// setNetwork handles PATCH /v1/jobs/{id}/network: the body is a policy,
// as "network" in POST /v1/jobs, checked the same way; it takes effect for
// the job's next connection (an ended job's next turn). 200 with the
// policy now in force.
func (s *server) setNetwork(w http.ResponseWriter, r *http.Request) error {
	var p egress.Policy
	if err := decodeJSON(w, r, min(s.cfg.MaxBodyBytes, maxPolicyBytes), &p); err != nil {
		return err
	}
	out, err := s.svc.SetNetwork(r.Context(), pathID(r), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// principal is who makes r, once its credentials passed the route's
// guard: "ui" for the web UI's session, "api" for a bearer token (tokens
// have no names). It rides on the request's context into every Service
// call (jobs.WithPrincipal), which records what it changes as done by it.
func (s *server) principal(r *http.Request) jobs.Principal {
	if r.Header.Get(CSRFHeader) != "" && !s.validToken(r.Header.Get("Authorization")) {
		return jobs.Principal{Name: "ui"}
	}
	return jobs.Principal{Name: "api"}
}

// policyError is a policy's decoding error as a 400 naming its field
// under "network".
func policyError(fe *egress.FieldError) error {
	field := "network"
	if fe.Field != "" {
		field += "." + fe.Field
	}
	msg := field + ": " + fe.Err.Error()
	return &apiError{status: http.StatusBadRequest, code: wire.CodeBadRequest, msg: msg, fields: []wire.FieldProblem{{Field: field, Message: msg}}}
}
