package cluster

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

// worker serves a worker's internal endpoint.
type worker struct {
	// want is the SHA-256 of the Authorization header that passes; hashing
	// both sides first makes the comparison's time independent of the
	// secret's length too.
	want  [sha256.Size]byte
	open  bool // a secret is configured
	local Guests
	log   *slog.Logger
}

// Handler is a worker's internal endpoint. GET /healthz answers anyone;
// every other request must carry Authorization: Bearer secret, and with an
// empty secret none passes (401). /internal/v1/jobs/{id}/guest/{path...},
// any method and WebSocket upgrades included, is reverse-proxied to
// /{path...} on the guest of job id's sandbox, which local reaches; path
// must be under /proxy/ (403 otherwise). A job unknown here is 404, one
// without a running sandbox here 409, a guest that does not answer 502,
// each as a wire.ErrorResponse.
func Handler(secret string, local Guests, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &worker{want: sha256.Sum256([]byte(bearer(secret))), open: secret != "", local: local, log: log}
	if !w.open {
		log.Warn("cluster: no cluster secret; the internal endpoint refuses every request")
	}
	tunnel := http.NewServeMux()
	tunnel.HandleFunc(routePrefix+"{id}/guest/{path...}", w.tunnel)
	tunnel.HandleFunc("/", func(rw http.ResponseWriter, _ *http.Request) {
		writeError(rw, http.StatusNotFound, wire.CodeNotFound, "no such internal route")
	})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	mux.Handle("/", w.authenticate(tunnel))
	return mux
}

// authenticate passes on only the requests that carry the secret.
func (w *worker) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
		if !w.open || subtle.ConstantTimeCompare(got[:], w.want[:]) != 1 {
			rw.Header().Set("WWW-Authenticate", `Bearer realm="agentbox-cluster"`)
			writeError(rw, http.StatusUnauthorized, wire.CodeUnauthorized, "missing or wrong cluster secret")
			return
		}
		next.ServeHTTP(rw, r)
	})
}

// tunnel forwards a request to the guest of the job's sandbox.
func (w *worker) tunnel(rw http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p, raw, ok := guestTarget(r.URL)
	if !ok {
		writeError(rw, http.StatusForbidden, wire.CodeForbidden, "only the guest's "+guestPath+" routes are reachable")
		return
	}
	g, err := w.local.Guest(r.Context(), id)
	if err != nil {
		w.guestError(rw, r, id, err)
		return
	}
	if r.Header.Get("Upgrade") != "" {
		// A WebSocket lasts as long as the user watches (see api.proxy).
		rc := http.NewResponseController(rw)
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { rewriteToGuest(pr, p, raw) },
		Transport:     g.Transport(),
		FlushInterval: -1, // event streams and long polls pass at once
		// Only the worker marks its own errors: a sandbox's service must
		// not pass for it.
		ModifyResponse: func(resp *http.Response) error { resp.Header.Del(errorHeader); return nil },
		ErrorHandler: func(rw http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the API side left
			}
			w.log.Warn("cluster: sandbox did not answer", "job_id", id, "err", err)
			writeError(rw, http.StatusBadGateway, wire.CodeBadGateway, fmt.Sprintf("the sandbox of job %s did not answer; it may be stopping", id))
		},
	}
	rp.ServeHTTP(rw, r)
}

// forwardedHeaders are set by the API side's proxy for the guest's
// services; httputil.ReverseProxy drops them before Rewrite.
var forwardedHeaders = []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"}

// rewriteToGuest aims the request at the guest's path p (raw: as encoded
// by the API side), keeping the query, Host (the browser's, which the
// services check origins against) and the headers the API side chose,
// minus the credentials.
func rewriteToGuest(pr *httputil.ProxyRequest, p, raw string) {
	pr.Out.URL = &url.URL{Scheme: "http", Host: "guest", Path: p, RawPath: raw, RawQuery: pr.In.URL.RawQuery}
	pr.Out.Host = pr.In.Host
	for _, k := range forwardedHeaders {
		if v := pr.In.Header.Values(k); len(v) > 0 {
			pr.Out.Header[k] = v
		}
	}
	dropCredentials(pr.Out.Header)
}

// guestTarget is the guest path a tunnel URL names, unescaped and as
// encoded; ok is false unless it is under /proxy/ without dot segments.
func guestTarget(u *url.URL) (p, raw string, ok bool) {
	parts := strings.SplitN(u.EscapedPath(), "/", 7) // "", internal, v1, jobs, id, guest, rest
	if len(parts) != 7 {
		return "", "", false
	}
	raw = "/" + parts[6]
	p, err := url.PathUnescape(raw)
	if err != nil || !strings.HasPrefix(raw, guestPath) || !strings.HasPrefix(p, guestPath) {
		return "", "", false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return "", "", false
		}
	}
	return p, raw, true
}

// guestError answers why the job's guest cannot be reached here.
func (w *worker) guestError(rw http.ResponseWriter, r *http.Request, id string, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(rw, http.StatusNotFound, wire.CodeNotFound, wire.MessageNoSuchJob)
	case errors.Is(err, jobs.ErrNoSandbox):
		writeError(rw, http.StatusConflict, wire.CodeNoSandbox, err.Error())
	case r.Context().Err() != nil:
		// The API side left (its client did); nobody reads an answer.
	default:
		w.log.Error("cluster: reach sandbox", "job_id", id, "err", err)
		writeError(rw, http.StatusInternalServerError, wire.CodeInternal, "internal error")
	}
}

// writeError answers with the API's error shape, marked as the worker's
// own (errorHeader).
func writeError(rw http.ResponseWriter, status int, code, msg string) {
	h := rw.Header()
	h.Set("Content-Type", "application/json")
	h.Set(errorHeader, code)
	rw.WriteHeader(status)
	_ = json.NewEncoder(rw).Encode(wire.ErrorResponse{Error: wire.ErrorDetail{Code: code, Message: msg}})
}

// jobs.Service is what serve passes as Guests.
var _ Guests = (*jobs.Service)(nil)
