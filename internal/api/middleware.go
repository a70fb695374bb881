package api

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/wire"
)

// wrap puts the route's handler behind panic recovery, request metrics and
// the auth check, and encodes the error it returns.
func (s *server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w}
		defer s.done(rt.pattern, rec, r, time.Now())
		defer s.recoverPanic(rec, r, rt.pattern)
		if rt.auth == authDownload {
			downloadHeaders(rec.Header())
		}
		if err := s.guard(rt, r); err != nil {
			s.fail(rec, r, rt, err)
			return
		}
		r = r.WithContext(jobs.WithPrincipal(r.Context(), s.principal(r)))
		if err := rt.h(rec, r); err != nil {
			s.fail(rec, r, rt, err)
		}
	})
}

// downloadHeaders are set on every answer of a download route, which a
// signed-in browser's navigation gets without the CSRF header (see
// apiSession): a listing or an error is shown, not saved, and a job's
// desktop or Jupyter page on the API's origin that opened it in a window
// must not read it. Cross-Origin-Opener-Policy (which the proxy never
// passes from a sandbox) cuts the window off from its opener, and a
// sandboxed document's origin is opaque.
func downloadHeaders(h http.Header) {
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
}

// done records the request in the metrics and the debug log.
func (s *server) done(pattern string, w *recorder, r *http.Request, start time.Time) {
	status := w.status
	if !w.wrote {
		status = http.StatusOK
	}
	elapsed := time.Since(start)
	s.metrics.observe(pattern, status, elapsed)
	if s.log.Enabled(r.Context(), slog.LevelDebug) {
		s.log.Debug("api request", "method", r.Method, "path", r.URL.Path, "route", pattern, "status", status, "duration", elapsed)
	}
}

// fail writes err as a JSON error, or as a short page to a browser on the
// desktop and Jupyter routes. Server faults are logged with the job id;
// their message to the client stays generic.
func (s *server) fail(w *recorder, r *http.Request, rt route, err error) {
	if r.Context().Err() != nil && errors.Is(err, context.Cause(r.Context())) {
		return // the client went away
	}
	status, code, msg, internal := errorStatus(err)
	if internal {
		s.log.Error("api request failed", "route", rt.pattern, "job_id", pathID(r), "err", err)
	}
	if w.wrote {
		return // too late to send a status; the stream just ends
	}
	if rt.auth == authPage {
		s.ui.Error(w, status, msg)
		return
	}
	if rt.auth == authViewer && wantsHTML(r) {
		writeErrorPage(w, status, code, msg)
		return
	}
	d := wire.ErrorDetail{Code: code, Message: msg}
	if !internal {
		d.Fields = fieldProblems(err)
	}
	writeErrorDetail(w, status, d)
}

func (s *server) recoverPanic(w *recorder, r *http.Request, pattern string) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v)
	}
	s.log.Error("api handler panicked", "route", pattern, "job_id", pathID(r), "panic", v, "stack", string(debug.Stack()))
	if !w.wrote {
		writeError(w, http.StatusInternalServerError, wire.CodeInternal, "internal error")
	}
}

// guard enforces the bearer token (or, without auth, a loopback Host).
// Viewer routes check their credentials in their handler (admit).
func (s *server) guard(rt route, r *http.Request) error {
	if rt.auth != authBearer && rt.auth != authDownload && rt.auth != authImage {
		return nil
	}
	if s.cfg.NoAuth {
		if err := checkLocalRequest(r); err != nil {
			return err
		}
		if s.apiSession(r, rt.auth) {
			return nil
		}
		return refuseWebPages(r)
	}
	if !s.validToken(r.Header.Get("Authorization")) && !s.apiSession(r, rt.auth) {
		return errorf(http.StatusUnauthorized, wire.CodeUnauthorized, "missing or invalid bearer token")
	}
	return nil
}

func hashTokens(tokens []string) [][32]byte {
	var out [][32]byte
	for _, t := range tokens {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, sha256.Sum256([]byte(t)))
		}
	}
	return out
}

// validToken compares digests in constant time, so neither a token's
// content nor its length leaks through timing.
func (s *server) validToken(header string) bool {
	const prefix = "bearer "
	if len(header) <= len(prefix) || !strings.EqualFold(header[:len(prefix)], prefix) {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(header[len(prefix):])))
	ok := 0
	for _, want := range s.tokens {
		ok |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	return ok == 1
}

// checkLocalRequest guards a server without auth against web pages: the
// Host must be one a DNS-rebinding page cannot produce, and a browser's
// Origin, when sent, must be local too (no cross-site POST from a page).
func checkLocalRequest(r *http.Request) error {
	if !loopbackHost(r.Host) {
		return errorf(http.StatusForbidden, wire.CodeForbidden,
			"this server runs without auth and only answers requests addressed to localhost or an IP address")
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !isLoopbackName(u.Hostname()) {
			return errorf(http.StatusForbidden, wire.CodeForbidden,
				"this server runs without auth and refuses requests from web pages of other origins")
		}
	}
	return nil
}

// refuseWebPages keeps the API of a server without auth from pages served
// on its own origin: a sandbox's desktop and Jupyter pages are proxied from
// it, and the agent controls what they contain. Browsers mark a request a
// page's script or frame made with Sec-Fetch-Site (same-origin, same-site,
// cross-site); an address typed into the bar says "none", and programs send
// no such header.
func refuseWebPages(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "none" {
		return errorf(http.StatusForbidden, wire.CodeForbidden,
			"this server runs without auth, so its API answers programs and addresses typed into the browser, not requests made by web pages (%s)", site)
	}
	return nil
}

// isLoopbackName reports whether host is localhost or a loopback IP.
func isLoopbackName(host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

// loopbackHost accepts IP literals and localhost names: a DNS-rebinding page
// can only make a browser send a Host it controls, which is neither.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	return net.ParseIP(host) != nil || isLoopbackName(host)
}

// recorder remembers the status a handler wrote.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *recorder) WriteHeader(code int) {
	if !w.wrote && code >= 200 {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets streaming handlers (SSE, zip) push what they wrote.
func (w *recorder) Flush() {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack hands the connection over (a WebSocket through the proxy) and
// records the switch, so that nothing more is written to it.
func (w *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.status, w.wrote = http.StatusSwitchingProtocols, true
	}
	return conn, brw, err
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
