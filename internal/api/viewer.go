package api

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/wire"
)

// Viewer links let a browser into a job's desktop and Jupyter without ever
// holding the API token: POST /v1/jobs/{id}/viewer (bearer auth) returns
// URLs carrying a ticket, valid once and for a minute; the proxy trades it
// for a cookie scoped to that job's paths and redirects to the URL without
// it. Tickets and cookies are HMAC-signed, bound to one job, and of
// different kinds, so neither passes for the other.

// Viewer link parameters.
const (
	TicketTTL       = time.Minute
	ViewerCookieTTL = 8 * time.Hour
	// ViewerCookie is the viewer cookie's name. Cookies named agentbox* are
	// the server's own: the proxy never forwards them to a sandbox, nor lets
	// a sandbox set them.
	ViewerCookie = "agentbox_view"
	// FrameCookie is the web UI's frame pass: with per-job view origins,
	// a ticket redeemed in a frame (the job page's Desktop and Jupyter
	// tabs) gets it as well, for TicketTTL, so that the redirects that
	// follow in the frame pass refuseOtherSites.
	FrameCookie = "agentbox_frame"
	ticketParam = "ticket"
	// maxUsedTickets bounds the memory of redeemed tickets; beyond it new
	// redemptions are refused until older tickets expire.
	maxUsedTickets = 1 << 16
)

// Token kinds, signed into each token.
const (
	kindTicket = "ticket"
	kindCookie = "cookie"
	kindFrame  = "frame"
)

// signer makes and checks viewer tokens: base64url(payload) "."
// base64url(HMAC-SHA256(key, payload)), the payload being
// "v2|kind|job id|expiry in unix milliseconds|nonce". (Milliseconds, not
// seconds, so that a server restarted within the second a ticket was issued
// still knows the ticket is older than itself.)
type signer struct {
	key []byte
	now func() time.Time
	// since is when this signer started: redeemed tickets are remembered
	// in memory only, so a ticket issued before it may have been used
	// already and is refused. Cookies, being reusable, are not.
	since time.Time

	mu   sync.Mutex
	used map[string]time.Time // redeemed tickets' nonces, until they expire
}

// newSigner uses key, or 32 random bytes if key is empty.
func newSigner(key []byte, now func() time.Time) *signer {
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key) // never fails (crypto/rand panics rather)
	}
	return &signer{key: key, now: now, since: now().Truncate(time.Millisecond), used: map[string]time.Time{}}
}

func (g *signer) sign(kind, jobID string, ttl time.Duration) (string, time.Time) {
	var n [16]byte
	_, _ = rand.Read(n[:])
	exp := g.now().Add(ttl).Truncate(time.Millisecond)
	payload := strings.Join([]string{"v2", kind, jobID, strconv.FormatInt(exp.UnixMilli(), 10),
		base64.RawURLEncoding.EncodeToString(n[:])}, "|")
	return enc(payload) + "." + enc(string(g.mac(payload))), exp
}

func (g *signer) mac(payload string) []byte {
	m := hmac.New(sha256.New, g.key)
	m.Write([]byte(payload))
	return m.Sum(nil)
}

func enc(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// check verifies a token's signature, kind, job and expiry, and returns its
// nonce and expiry.
func (g *signer) check(kind, jobID, tok string) (nonce string, exp time.Time, ok bool) {
	p64, m64, found := strings.Cut(tok, ".")
	payload, err1 := base64.RawURLEncoding.DecodeString(p64)
	sig, err2 := base64.RawURLEncoding.DecodeString(m64)
	if !found || err1 != nil || err2 != nil || !hmac.Equal(sig, g.mac(string(payload))) {
		return "", time.Time{}, false
	}
	f := strings.Split(string(payload), "|")
	if len(f) != 5 || f[0] != "v2" || f[1] != kind || f[2] != jobID {
		return "", time.Time{}, false
	}
	ms, err := strconv.ParseInt(f[3], 10, 64)
	if exp = time.UnixMilli(ms); err != nil || !g.now().Before(exp) {
		return "", time.Time{}, false
	}
	return f[4], exp, true
}

// errTicket is why a ticket was refused; the API answers 401 with it.
var errTicket = errors.New("this viewer link has expired or was already used")

// redeem accepts a job's ticket once.
func (g *signer) redeem(jobID, tok string) error {
	nonce, exp, ok := g.check(kindTicket, jobID, tok)
	if !ok || exp.Add(-TicketTTL).Before(g.since) {
		return errTicket
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, used := g.used[nonce]; used {
		return errTicket
	}
	if len(g.used) >= maxUsedTickets {
		now := g.now()
		for n, e := range g.used {
			if !now.Before(e) {
				delete(g.used, n)
			}
		}
		if len(g.used) >= maxUsedTickets {
			return fmt.Errorf("%w: too many viewer links were opened in the last minute; retry shortly", errTicket)
		}
	}
	g.used[nonce] = exp
	return nil
}

// viewer handles POST /v1/jobs/{id}/viewer: one-use links to the job's
// desktop and Jupyter, for a job that is pending or running.
func (s *server) viewer(w http.ResponseWriter, r *http.Request) error {
	j, err := s.svc.Get(r.Context(), pathID(r))
	if err != nil {
		return err
	}
	if j.Status.Final() {
		return errorf(http.StatusConflict, wire.CodeNoSandbox, "job %s is %s: its sandbox was removed when it ended", j.ID, j.Status)
	}
	origin := s.cfg.BaseURL
	if s.views != nil {
		origin = s.views.origin(j.ID)
	}
	base := origin + "/v1/jobs/" + url.PathEscape(j.ID)
	desktop, exp := s.view.sign(kindTicket, j.ID, TicketTTL)
	jupyter, _ := s.view.sign(kindTicket, j.ID, TicketTTL)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, wire.ViewerLinks{
		DesktopURL: base + "/desktop/?" + ticketParam + "=" + desktop,
		JupyterURL: base + "/jupyter/?" + ticketParam + "=" + jupyter,
		ExpiresAt:  exp.UTC(),
	})
	return nil
}

// admit checks the credentials of a desktop or Jupyter request. A GET with
// a ticket is answered here (done): with the viewer cookie and a redirect
// to the same URL without the ticket, so that it leaves the address bar
// and the history at once. Otherwise the request needs a bearer token or
// the job's viewer cookie (or, without auth, to be local). Tokens in the
// query string are never accepted.
func (s *server) admit(w http.ResponseWriter, r *http.Request) (done bool, err error) {
	id := pathID(r)
	if t := r.URL.Query().Get(ticketParam); t != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		terr := errTicket // with per-job origins, tickets are for the job's host only
		if s.viewerHost(r, id) {
			terr = s.view.redeem(id, t)
		}
		if terr == nil {
			s.setViewerCookie(w, r, id)
			if s.views != nil && r.Header.Get("Sec-Fetch-Dest") == "iframe" {
				s.setCookie(w, r, id, FrameCookie, kindFrame, TicketTTL)
			}
		} else if s.credentials(r, id) != nil {
			return false, errorf(http.StatusUnauthorized, wire.CodeUnauthorized, "%v; run 'agentbox view %s' for a new one", terr, id)
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		http.Redirect(w, r, withoutTicket(r.URL), http.StatusSeeOther)
		return true, nil
	}
	return false, s.credentials(r, id)
}

// credentials checks a request's bearer token or viewer cookie for job id
// (or, without auth, that it is local), and its Origin: a WebSocket, and
// anything a browser sends without a bearer token, from a page of another
// origin is refused. (A page cannot add a bearer token across origins: the
// API grants no CORS.)
func (s *server) credentials(r *http.Request, id string) error {
	bearer := false
	switch {
	case s.cfg.NoAuth:
		if err := checkLocalRequest(r); err != nil {
			return err
		}
		if !s.viewerHost(r, id) {
			// With per-job origins, the API's host serves the views
			// to programs only.
			if err := refuseWebPages(r); err != nil {
				return err
			}
		}
	case s.validToken(r.Header.Get("Authorization")):
		bearer = true
	case s.viewerHost(r, id) && s.validViewerCookie(r, id):
	default:
		return errorf(http.StatusUnauthorized, wire.CodeUnauthorized,
			"this page needs a viewer link: run 'agentbox view %s' and open the link it prints within a minute (each link works once); "+
				"if you just opened one from another web site, press Enter in the address bar", id)
	}
	if (isUpgrade(r) || !bearer) && !s.sameOrigin(r, id) {
		return errorf(http.StatusForbidden, wire.CodeForbidden, "requests from pages of other origins are refused")
	}
	if !bearer {
		return refuseOtherSites(r, s.views != nil && s.validCookie(r, id, FrameCookie, kindFrame))
	}
	return nil
}

// refuseOtherSites keeps pages of other sites (another job's view host
// under the same domain is same-site) from making a browser load the views
// with its cookie: as a script, an image, a frame. Browsers send no Origin
// with those, but mark them with Fetch Metadata. Following a link to the
// view (a top-level navigation) stays allowed, and so does a frame's with
// the frame pass (framed: see FrameCookie): the views' CSP frame-ancestors
// keeps every page but the web UI's from showing them in one (see
// filterResponse).
func refuseOtherSites(r *http.Request, framed bool) error {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		dest := r.Header.Get("Sec-Fetch-Dest")
		if r.Method == http.MethodGet && r.Header.Get("Sec-Fetch-Mode") == "navigate" &&
			(dest == "document" || dest == "" || framed && dest == "iframe") {
			return nil
		}
		return errorf(http.StatusForbidden, wire.CodeForbidden, "the views answer their own pages and links to them, not requests that pages of other sites make")
	}
	return nil
}

// viewerHost reports whether a browser may use viewer links and cookies
// for job id on r's host: any host without per-job origins, else the job's
// own view host only.
func (s *server) viewerHost(r *http.Request, id string) bool {
	return s.views == nil || s.viewHostOf(r, id)
}

func (s *server) validViewerCookie(r *http.Request, id string) bool {
	return s.validCookie(r, id, ViewerCookie, kindCookie)
}

// validCookie reports whether r has a valid cookie name of kind for job id.
func (s *server) validCookie(r *http.Request, id, name, kind string) bool {
	// Every cookie of the name counts: a page may have set a bogus one on a
	// longer path, which must not hide the real one.
	for _, c := range r.CookiesNamed(name) {
		if _, _, ok := s.view.check(kind, id, c.Value); ok {
			return true
		}
	}
	return false
}

func (s *server) setViewerCookie(w http.ResponseWriter, r *http.Request, id string) {
	s.setCookie(w, r, id, ViewerCookie, kindCookie, ViewerCookieTTL)
}

// setCookie sets a signed cookie of kind for job id's paths.
func (s *server) setCookie(w http.ResponseWriter, r *http.Request, id, name, kind string, ttl time.Duration) {
	v, exp := s.view.sign(kind, id, ttl)
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: v, Path: "/v1/jobs/" + url.PathEscape(id) + "/",
		Expires: exp, MaxAge: int(ttl / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || strings.HasPrefix(s.cfg.BaseURL, "https:") || s.views != nil && s.views.scheme == "https",
	})
}

// sameOrigin reports whether the request's Origin, if any, is this
// server: the Host asked for, or the configured base URL's (on a job's
// view host, the job's view origin).
func (s *server) sameOrigin(r *http.Request, id string) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false // "null" (a sandboxed frame, a file) included
	}
	if s.views != nil && s.viewHostOf(r, id) {
		return strings.EqualFold(o, s.views.origin(id)) // the scheme too
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	b, err := url.Parse(s.cfg.BaseURL)
	return s.cfg.BaseURL != "" && err == nil && strings.EqualFold(u.Host, b.Host)
}

// withoutTicket is u's path and query minus the ticket, root-relative.
func withoutTicket(u *url.URL) string {
	out := u.EscapedPath()
	if q := dropParam(u.RawQuery, ticketParam); q != "" {
		out += "?" + q
	}
	return out
}

// dropParam removes a parameter from a raw query, leaving the rest as sent.
func dropParam(rawQuery, name string) string {
	var keep []string
	for _, p := range strings.Split(rawQuery, "&") {
		k, _, _ := strings.Cut(p, "=")
		if uk, err := url.QueryUnescape(k); p == "" || err == nil && uk == name {
			continue
		}
		keep = append(keep, p)
	}
	return strings.Join(keep, "&")
}

// addSlash handles GET /v1/jobs/{id}/desktop and .../jupyter: the pages'
// relative links need the trailing slash.
func addSlash(w http.ResponseWriter, r *http.Request) error {
	u := r.URL.EscapedPath() + "/"
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	http.Redirect(w, r, u, http.StatusMovedPermanently)
	return nil
}
