package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
	"github.com/agentbox/agentbox/internal/workspace"
)

// apiError is an error the API itself raises with a status and a message fit
// for the client.
type apiError struct {
	status int
	code   string
	msg    string
	fields []wire.FieldProblem // the request's fields concerned, if known
}

func (e *apiError) Error() string { return e.msg }

func errorf(status int, code, format string, args ...any) error {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return errorf(http.StatusBadRequest, wire.CodeBadRequest, format, args...)
}

// bodyFailure reports whether err is a body too large or too slow, which
// keeps its own status (413, 408) through the handlers that read bodies.
func bodyFailure(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe) || errors.As(err, new(*errBodyTimeout))
}

// errNoFile hides why a workspace path could not be opened (absent, escapes
// the workspace, a dangling symlink): all look the same to the client.
var errNoFile = errors.New("no such file in the job's workspace; GET /v1/jobs/{id}/files/DIR/ lists what a directory holds (files/ the top)")

// errorStatus maps an error to its HTTP status, code and client message.
// It is the only place that knows which sentinel means which status; internal
// reports whether the error is the server's fault (the message is then generic).
func errorStatus(err error) (status int, code, msg string, internal bool) {
	var ae *apiError
	var mbe *http.MaxBytesError
	var bte *errBodyTimeout
	switch {
	case errors.As(err, &ae):
		return ae.status, ae.code, ae.msg, false
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, wire.CodeTooLarge, fmt.Sprintf("request body larger than %d bytes", mbe.Limit), false
	case errors.As(err, &bte):
		return http.StatusRequestTimeout, wire.CodeRequestTimeout, bte.Error(), false
	case errors.Is(err, errNoFile):
		return http.StatusNotFound, wire.CodeNotFound, errNoFile.Error(), false
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, wire.CodeNotFound, wire.MessageNoSuchJob, false
	case errors.Is(err, store.ErrConflict):
		return http.StatusUnprocessableEntity, wire.CodeIdempotencyConflict, "Idempotency-Key was already used with a different request", false
	case errors.Is(err, workspace.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, wire.CodeTooLarge, err.Error(), false
	case errors.Is(err, jobs.ErrNoMedia):
		return http.StatusNotFound, wire.CodeNotFound, err.Error(), false
	case errors.Is(err, jobs.ErrBadMessage), errors.Is(err, workspace.ErrBadArchive), errors.Is(err, jobs.ErrBadStart), errors.Is(err, jobs.ErrBadNetwork),
		errors.Is(err, jobs.ErrBadMediaName):
		return http.StatusBadRequest, wire.CodeBadRequest, err.Error(), false
	case errors.Is(err, jobs.ErrOverCeiling):
		return http.StatusBadRequest, wire.CodeOverCeiling, err.Error(), false
	case errors.Is(err, sandbox.ErrIsolationUnavailable):
		return http.StatusBadRequest, wire.CodeIsolation, err.Error(), false
	case errors.Is(err, jobs.ErrNoModel):
		return http.StatusBadRequest, wire.CodeNoModel, err.Error(), false
	case errors.Is(err, jobs.ErrImageNotAllowed):
		return http.StatusBadRequest, wire.CodeImageNotAllowed, err.Error(), false
	case errors.Is(err, jobs.ErrInvalid):
		return http.StatusUnprocessableEntity, wire.CodeValidation, err.Error(), false
	case errors.Is(err, store.ErrInvalid):
		return http.StatusBadRequest, wire.CodeBadRequest, err.Error(), false
	case errors.Is(err, jobs.ErrNotEnded):
		return http.StatusConflict, wire.CodeNotEnded, err.Error(), false
	case errors.Is(err, jobs.ErrEnded):
		return http.StatusConflict, wire.CodeAlreadyEnded, err.Error(), false
	case errors.Is(err, jobs.ErrDeleted):
		return http.StatusGone, wire.CodeDeleted, err.Error(), false
	case errors.Is(err, jobs.ErrBadRepo), errors.Is(err, jobs.ErrNotRepo):
		return http.StatusBadRequest, wire.CodeBadRequest, err.Error(), false
	case errors.Is(err, jobs.ErrNoDiff):
		return http.StatusNotFound, wire.CodeNotFound, err.Error(), false
	case errors.Is(err, jobs.ErrDiffUnavailable):
		return http.StatusServiceUnavailable, wire.CodeUnavailable, err.Error(), false
	case errors.Is(err, jobs.ErrNoSandbox):
		return http.StatusConflict, wire.CodeNoSandbox, err.Error(), false
	case errors.Is(err, guest.ErrService):
		return http.StatusServiceUnavailable, wire.CodeUnavailable, err.Error(), false
	}
	return http.StatusInternalServerError, wire.CodeInternal, "internal error", true
}

// writeJSON encodes v with status. An encoding failure after the header is
// out cannot be reported to the client; the connection simply ends.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeErrorDetail(w, status, wire.ErrorDetail{Code: code, Message: msg})
}

func writeErrorDetail(w http.ResponseWriter, status int, d wire.ErrorDetail) {
	clearHeaders(w, status)
	writeJSON(w, status, wire.ErrorResponse{Error: d})
}

// fieldProblems are the problems err names field by field, if any.
func fieldProblems(err error) []wire.FieldProblem {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.fields
	}
	var p *jobs.Problems
	if !errors.As(err, &p) {
		return nil
	}
	out := make([]wire.FieldProblem, len(p.List))
	for i, q := range p.List {
		out[i] = wire.FieldProblem{Field: q.Field, Message: q.Message}
	}
	return out
}

// clearHeaders drops what a handler may have set for the answer it meant
// to give, and asks a 401's client for a bearer token.
func clearHeaders(w http.ResponseWriter, status int) {
	h := w.Header()
	for _, k := range []string{"Content-Disposition", "Content-Length", "Last-Modified", "Etag"} {
		h.Del(k)
	}
	if status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="agentbox"`)
	}
}

// errorPage is the error of a desktop or Jupyter route as a browser shows it.
var errorPage = template.Must(template.New("error").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>agentbox: {{.Title}}</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 3em auto">
<h1>{{.Title}}</h1>
<p>{{.Message}}</p>
<p><small>{{.Status}} {{.Code}}</small></p>
</body></html>
`))

// writeErrorPage writes an error as a short HTML page, for people.
func writeErrorPage(w http.ResponseWriter, status int, code, msg string) {
	clearHeaders(w, status)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = errorPage.Execute(w, map[string]any{"Title": http.StatusText(status), "Message": msg, "Status": status, "Code": code})
}

// wantsHTML reports whether the client is a browser loading a page.
func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}
