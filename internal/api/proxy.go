package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/wire"
)

// proxyMethods are the methods the desktop and Jupyter routes pass on
// (HEAD comes with GET). A WebSocket is a GET with Upgrade.
var proxyMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// passedResponseHeaders are the only response headers of a sandbox's web
// service that reach the browser: what a page needs to be shown, cached,
// downloaded, redirected within the job's paths and upgraded to a
// WebSocket. Every other header is dropped, since a page of the sandbox
// would otherwise act on the whole origin (the API, the other jobs' views)
// with headers a deny-list would have to know of: NEL and Report-To (the
// browser reports later URLs of the origin for up to a year),
// Reporting-Endpoints, Refresh, Accept-CH and Critical-CH, Set-Login,
// Origin-Agent-Cluster, Access-Control-Allow-*, Strict-Transport-Security,
// Clear-Site-Data, Service-Worker-Allowed, Alt-Svc, WWW-Authenticate (a
// login dialog in the API's name), and Cross-Origin-Opener-Policy (the
// UI's own, which would keep a window the page opens on the web UI in its
// browsing context group, where it could script it). Set-Cookie and
// Location pass only as filterResponse confines them.
var passedResponseHeaders = map[string]bool{
	"Accept-Ranges": true, "Age": true, "Cache-Control": true, "Content-Disposition": true,
	"Content-Encoding": true, "Content-Language": true, "Content-Length": true, "Content-Range": true,
	"Content-Security-Policy": true, "Content-Type": true, "Date": true, "Etag": true, "Expires": true,
	"Last-Modified": true, "Location": true, "Pragma": true, "Retry-After": true, "Set-Cookie": true,
	"Vary": true, "X-Content-Type-Options": true,
	// A WebSocket's handshake (101 Switching Protocols).
	"Connection": true, "Upgrade": true, "Sec-Websocket-Accept": true,
	"Sec-Websocket-Protocol": true, "Sec-Websocket-Extensions": true,
}

// proxy handles any method on /v1/jobs/{id}/{service}/{path...}: the
// request goes to the guest of the job's sandbox, as
// /proxy/{service}/{path...}, over the guest's own connection (no port of
// the sandbox is ever published). Everything the sandbox answers is
// untrusted: see filterResponse.
func (s *server) proxy(service string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if done, err := s.admit(w, r); done || err != nil {
			return err
		}
		if err := s.refuseTokenInQuery(r); err != nil {
			return err
		}
		id := pathID(r)
		g, err := s.svc.Guest(r.Context(), id)
		if err != nil {
			return err
		}
		asUpload(r, s.cfg.MinUploadRate) // a file sent to Jupyter is an upload
		if isUpgrade(r) {
			// A WebSocket lasts as long as the user watches. net/http
			// clears the deadlines when the proxy takes the connection
			// over; clearing them now also covers the wait for the
			// guest's answer (starting a desktop takes seconds).
			rc := http.NewResponseController(w)
			_ = rc.SetReadDeadline(time.Time{})
			_ = rc.SetWriteDeadline(time.Time{})
		}
		var perr error
		p := &httputil.ReverseProxy{
			Rewrite:        func(pr *httputil.ProxyRequest) { rewrite(pr, service) },
			Transport:      g.Transport(),
			ModifyResponse: func(resp *http.Response) error { return filterResponse(resp, r, id, service, s.uiOrigin()) },
			ErrorHandler:   func(_ http.ResponseWriter, _ *http.Request, err error) { perr = err },
		}
		p.ServeHTTP(w, r)
		return s.proxyError(r, id, service, perr)
	}
}

// proxyError turns what went wrong on the way to the guest into the API's
// error: a service the guest could not start is 503 with its message; no
// answer at all is 502, the cause (host paths) only logged.
func (s *server) proxyError(r *http.Request, id, service string, err error) error {
	var ge *guest.Error
	switch {
	case err == nil:
		return nil
	case r.Context().Err() != nil:
		return context.Cause(r.Context())
	case errors.As(err, &ge):
		return fmt.Errorf("the %s of job %s is unavailable: %w", service, id, ge)
	case errors.Is(err, jobs.ErrNoSandbox):
		return err // the job ended, or left its worker, on the way (409)
	}
	s.log.Warn("proxy: sandbox did not answer", "job_id", id, "service", service, "err", err)
	return errorf(http.StatusBadGateway, wire.CodeBadGateway, "the sandbox of job %s did not answer; it may be stopping", id)
}

// refuseTokenInQuery keeps an API token put into a URL (?token=,
// ?access_token=) from being passed on to the sandbox: such a URL is
// refused, never honored as auth.
func (s *server) refuseTokenInQuery(r *http.Request) error {
	q := r.URL.Query()
	for _, k := range []string{"token", "access_token"} {
		for _, v := range q[k] {
			if s.validToken("Bearer " + v) {
				return badRequest("the API token must never be put in a URL; send it as Authorization: Bearer, or open a viewer link")
			}
		}
	}
	return nil
}

// rewrite aims the request at the guest's /proxy/{service}/{rest}, keeping
// the path's encoding and the query (minus a ticket) as sent. Only the
// headers and cookies the services need go along (forwardHeaders,
// serviceCookie): the API's credentials, and those an auth proxy in front
// of the API may add (its session cookies, identity tokens), stay behind.
// Host is kept, so the services' own origin checks see the browser's.
func rewrite(pr *httputil.ProxyRequest, service string) {
	in := pr.In
	rest := ""
	if parts := strings.SplitN(in.URL.EscapedPath(), "/", 6); len(parts) == 6 {
		rest = parts[5] // "", "v1", "jobs", id, service, rest
	}
	raw := "/proxy/" + service + "/" + rest
	p, err := url.PathUnescape(raw)
	if err != nil {
		p, raw = "/proxy/"+service+"/", ""
	}
	pr.Out.URL = &url.URL{Scheme: "http", Host: "guest", Path: p, RawPath: raw, RawQuery: dropParam(in.URL.RawQuery, ticketParam)}
	pr.Out.Host = in.Host
	h := pr.Out.Header
	for name := range h {
		if !forwardHeaders[name] {
			h.Del(name)
		}
	}
	keepServiceCookies(h, service)
	proto := "http"
	if in.TLS != nil {
		proto = "https"
	}
	h.Set("X-Forwarded-Proto", proto)
	h.Set("X-Forwarded-Host", in.Host)
}

// ownCookie reports whether a cookie name is one of agentbox's own.
func ownCookie(name string) bool {
	return len(name) >= 8 && strings.EqualFold(name[:8], "agentbox")
}

// forwardHeaders are the request headers passed to a sandbox's web
// service: content negotiation, caching, the WebSocket handshake (Connection
// and Upgrade are set by the reverse proxy itself) and Jupyter's XSRF token.
var forwardHeaders = map[string]bool{
	"Accept": true, "Accept-Encoding": true, "Accept-Language": true,
	"Cache-Control": true, "Pragma": true, "Content-Type": true, "Content-Length": true,
	"Range": true, "If-Range": true, "If-Match": true, "If-None-Match": true,
	"If-Modified-Since": true, "If-Unmodified-Since": true,
	"User-Agent": true, "Origin": true, "Referer": true, "Cookie": true,
	"Connection": true, "Upgrade": true,
	"Sec-Websocket-Key": true, "Sec-Websocket-Version": true,
	"Sec-Websocket-Protocol": true, "Sec-Websocket-Extensions": true,
	"X-Xsrftoken": true, "X-Requested-With": true,
}

// serviceCookie reports whether a cookie belongs to the service: Jupyter's
// XSRF and user cookies; noVNC uses none.
func serviceCookie(service, name string) bool {
	return service == "jupyter" && (name == "_xsrf" || strings.HasPrefix(name, "username-"))
}

// keepServiceCookies leaves in the Cookie headers only the service's own
// cookies, byte for byte.
func keepServiceCookies(h http.Header, service string) {
	var keep []string
	for _, line := range h.Values("Cookie") {
		for _, c := range strings.Split(line, ";") {
			c = strings.TrimSpace(c)
			name, _, _ := strings.Cut(c, "=")
			if c != "" && serviceCookie(service, strings.TrimSpace(name)) {
				keep = append(keep, c)
			}
		}
	}
	h.Del("Cookie")
	if len(keep) > 0 {
		h.Set("Cookie", strings.Join(keep, "; "))
	}
}

// filterResponse keeps a sandbox's answer within the job's paths: its
// cookies are confined to /v1/jobs/{id}/ (agentbox's own refused), headers
// that act on the whole origin are dropped, and no other site may frame
// it but the web UI's origin ui, if the views have origins of their own
// (see uiOrigin). A service the guest could not start becomes an error.
func filterResponse(resp *http.Response, in *http.Request, id, service, ui string) error {
	if err := guestServiceError(resp); err != nil {
		return err
	}
	h := resp.Header
	for k := range h {
		if !passedResponseHeaders[k] {
			h.Del(k)
		}
	}
	scope := "/v1/jobs/" + url.PathEscape(id) + "/"
	confineLocation(h, in, scope)
	var cookies []string
	for _, line := range h.Values("Set-Cookie") {
		c, err := http.ParseSetCookie(line)
		if err != nil || ownCookie(c.Name) {
			continue
		}
		c.Domain = ""
		if !strings.HasPrefix(c.Path, scope) {
			c.Path = scope + service + "/"
		}
		if v := c.String(); v != "" {
			cookies = append(cookies, v)
		}
	}
	h.Del("Set-Cookie")
	for _, c := range cookies {
		h.Add("Set-Cookie", c)
	}
	ancestors := "frame-ancestors 'self'"
	if ui != "" {
		ancestors += " " + ui
	}
	h.Add("Content-Security-Policy", ancestors)
	// Nor load it as a script or an image (which needs no CORS).
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	return nil
}

// confineLocation drops a redirect's Location unless it stays within
// scope (the job's paths) on the host in asked for, and passes what it
// keeps as an absolute path of its own making: a sandbox's page must not
// make the API's origin an open redirect to another site, nor to another
// job's or the API's own paths. Browsers read a backslash as a slash
// ("\\evil.example" is "//evil.example"), and skip some controls, where Go's
// parser does not; a Location with either is dropped whole.
func confineLocation(h http.Header, in *http.Request, scope string) {
	loc := h.Get("Location")
	if loc == "" {
		return
	}
	h.Del("Location")
	if strings.ContainsFunc(loc, func(r rune) bool { return r == '\\' || r <= ' ' || r == 0x7f }) {
		return
	}
	base := &url.URL{Scheme: "http", Host: in.Host, Path: in.URL.Path}
	u, err := base.Parse(loc)
	if err != nil || u.Host != base.Host || u.User != nil || (u.Scheme != "http" && u.Scheme != "https") ||
		!strings.HasPrefix(path.Clean(u.Path)+"/", scope) {
		return
	}
	own := &url.URL{Path: path.Clean(u.Path), RawQuery: u.RawQuery, Fragment: u.Fragment}
	if strings.HasSuffix(u.Path, "/") && own.Path != "/" {
		own.Path += "/"
	}
	h.Set("Location", own.String())
}

// guestServiceError recognizes the guest's own 503 for a service that
// could not be started (as opposed to one the service sent) and returns
// it; any other answer is left whole.
func guestServiceError(resp *http.Response) error {
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return nil
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var body struct {
		Error *guest.Error `json:"error"`
	}
	if err == nil && json.Unmarshal(head, &body) == nil && body.Error != nil && body.Error.Code == guest.CodeService {
		resp.Body.Close()
		msg := body.Error.Message
		if len(msg) > 500 {
			msg = msg[:500] + "..."
		}
		return &guest.Error{Code: guest.CodeService, Message: msg}
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	return nil
}

// isUpgrade reports whether the request asks to switch protocols (a
// WebSocket).
func isUpgrade(r *http.Request) bool {
	for _, v := range r.Header.Values("Connection") {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "upgrade") {
				return r.Header.Get("Upgrade") != ""
			}
		}
	}
	return false
}
