package api

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/ui"
	"github.com/agentbox/agentbox/internal/wire"
)

// The web UI's sessions. A person signs in with the API token once
// (POST /ui/login); the server answers with a session cookie, HMAC-signed
// like the viewer cookies (kind "session", no job), HttpOnly and
// SameSite=Strict, so no other site's page can use it. The cookie alone
// opens the UI's pages to top-level navigations; everything else it is
// accepted for needs the session's CSRF token as well, in the X-CSRF-Token
// header (the UI's scripts) or the csrf form field (sign-out). The token is
// an HMAC of the session's nonce, written into the UI's pages only.
//
// Without per-job view origins (Config.ViewURL), a sandbox's desktop and
// Jupyter pages are served on the API's own origin, and their scripts,
// written by the agent, run as same-origin as the UI. The cookie is then no
// secret from them, so what guards the session is that they cannot read a
// UI page: pages are served to top-level navigations only (Fetch Metadata's
// Sec-Fetch-Dest: document), never framed (frame-ancestors 'none'), and a
// window a view opens on them loses its opener (Cross-Origin-Opener-Policy).
// That needs a browser that sends Fetch Metadata, which browsers do over
// HTTPS and to localhost: a cookie without it is refused.

// Session parameters.
const (
	// SessionCookie is the web UI's session cookie. Its name starts with
	// "agentbox", so the desktop and Jupyter proxy neither forwards it to a
	// sandbox nor lets one set it.
	SessionCookie = "agentbox_session"
	SessionTTL    = 12 * time.Hour
	// CSRFHeader carries the session's CSRF token on the UI's requests.
	CSRFHeader = "X-CSRF-Token"
	csrfField  = "csrf"
	kindSess   = "session"
	// maxLoginBytes bounds the sign-in form.
	maxLoginBytes = 8 << 10
)

// session is a request's web UI session.
type session struct {
	// CSRF is the token the session's state-changing requests carry.
	CSRF string
}

// sessionOf returns r's session: its signed cookie's, or without auth, a
// session every local request has. It checks the cookie only, not how the
// request was made (see pageRequest, apiRequest).
func (s *server) sessionOf(r *http.Request) (session, bool) {
	if s.cfg.NoAuth {
		if checkLocalRequest(r) != nil {
			return session{}, false
		}
		return session{CSRF: s.csrfFor("no-auth")}, true
	}
	for _, c := range r.CookiesNamed(SessionCookie) {
		if nonce, _, ok := s.view.check(kindSess, "", c.Value); ok {
			return session{CSRF: s.csrfFor(nonce)}, true
		}
	}
	return session{}, false
}

func (s *server) csrfFor(nonce string) string {
	return enc(string(s.view.mac("csrf|" + nonce)))
}

// fetchMetadata refuses a cookie-authenticated request without Fetch
// Metadata while the views share the API's origin (see the package comment
// above), and any that another site's page made.
func (s *server) fetchMetadata(r *http.Request) error {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "":
		if s.views == nil {
			return errorf(http.StatusForbidden, wire.CodeForbidden,
				"the web UI needs a browser that sends Fetch Metadata (current Chromium, Firefox or Safari), over HTTPS or on localhost")
		}
	case "cross-site", "same-site":
		return errorf(http.StatusForbidden, wire.CodeForbidden, "requests from pages of other sites are refused")
	}
	return nil
}

// pageRequest reports whether r may be answered with a UI page: a
// top-level navigation, not a frame, a script, a fetch.
func pageRequest(r *http.Request) bool {
	dest, mode := r.Header.Get("Sec-Fetch-Dest"), r.Header.Get("Sec-Fetch-Mode")
	return (dest == "" || dest == "document") && (mode == "" || mode == "navigate")
}

// apiSession reports whether r is the UI's own request to an API route
// of auth mode: a session cookie, its CSRF token in the header, from the
// UI's origin. A download route (authDownload: the workspace's zip, a
// file) takes a top-level navigation of the UI's (a link) without the
// header: its answer is an attachment, saved, never shown to a page. An
// image route (authImage) takes the job page's <img> (imageSession).
func (s *server) apiSession(r *http.Request, mode authMode) bool {
	sess, ok := s.sessionOf(r)
	if !ok || s.fetchMetadata(r) != nil || !s.sameOrigin(r, "") {
		return false
	}
	if got := r.Header.Get(CSRFHeader); got != "" {
		return subtle.ConstantTimeCompare([]byte(got), []byte(sess.CSRF)) == 1
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch mode {
	case authDownload:
		return r.Header.Get("Sec-Fetch-Mode") == "navigate" && r.Header.Get("Sec-Fetch-Dest") == "document"
	case authImage:
		return s.imageSession(r)
	}
	return false
}

// imageSession reports whether r, which has the session cookie but no
// CSRF header (an <img> sends none), is the UI's job page loading an
// image of its own job: Sec-Fetch-Dest image and Sec-Fetch-Site
// same-origin, which a browser sets and no page can forge, a Referer
// that is the job's UI page (/jobs/{id}) on the same host, and the job's
// media key (?k=, see mediaKey), which only the UI's pages and fragments
// carry. That is acceptable for an image: the answer is pixels only
// (nosniff, a PNG or JPEG Content-Type, a sandbox CSP, never script or
// text), another site's page cannot make the request with the cookie
// (SameSite=Strict) nor read it (CORP same-origin), and the key keeps out
// the one same-origin page that is not the UI's: a desktop or Jupyter
// page of a job, served on the API's origin without AGENTBOX_VIEW_URL,
// which could otherwise draw another job's screenshots on a canvas and
// read them. (The Referer alone does not: such a page can give itself the
// job page's URL with history.replaceState, and the Referer follows.)
func (s *server) imageSession(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Dest") != "image" || r.Header.Get("Sec-Fetch-Site") != "same-origin" ||
		subtle.ConstantTimeCompare([]byte(r.URL.Query().Get("k")), []byte(s.mediaKey(r.PathValue("id")))) != 1 {
		return false
	}
	ref, err := url.Parse(r.Referer())
	if err != nil || ref.Path != "/jobs/"+r.PathValue("id") {
		return false
	}
	base, err := url.Parse(s.cfg.BaseURL)
	return strings.EqualFold(ref.Host, r.Host) || (s.cfg.BaseURL != "" && err == nil && strings.EqualFold(ref.Host, base.Host))
}

// formSession checks a UI form's POST: the session and the csrf field.
func (s *server) formSession(r *http.Request) (session, error) {
	sess, ok := s.sessionOf(r)
	if !ok {
		return session{}, errorf(http.StatusUnauthorized, wire.CodeUnauthorized, "you are not signed in")
	}
	if err := s.fetchMetadata(r); err != nil {
		return session{}, err
	}
	if !s.sameOrigin(r, "") {
		return session{}, errorf(http.StatusForbidden, wire.CodeForbidden, "requests from pages of other origins are refused")
	}
	if subtle.ConstantTimeCompare([]byte(r.PostFormValue(csrfField)), []byte(sess.CSRF)) != 1 {
		return session{}, errorf(http.StatusForbidden, wire.CodeForbidden, "this form has expired; reload the page and try again")
	}
	return sess, nil
}

// securePage sets the headers every UI answer carries: no framing, no
// opener across it, nothing cached, and a Content-Security-Policy that
// loads nothing from another origin. frameSrc is the views' origins when
// they have their own (the job page frames them), else 'none'.
func securePage(h http.Header, frameSrc string) {
	if frameSrc == "" {
		frameSrc = "'none'"
	}
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; font-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'; frame-src "+frameSrc)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
}

// frameSrc is the CSP source of the jobs' view origins, "" when they
// share the API's.
func (s *server) frameSrc() string {
	if s.views == nil {
		return ""
	}
	return s.views.scheme + "://*" + s.views.suffix + s.views.port
}

// login handles POST /ui/login: the sign-in form's token. A valid one
// gets a session cookie and a redirect to the page asked for; a wrong one
// the sign-in page again, with why.
func (s *server) login(w http.ResponseWriter, r *http.Request) error {
	securePage(w.Header(), "")
	if s.cfg.NoAuth {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return nil
	}
	if !s.ownForm(r) {
		return errorf(http.StatusForbidden, wire.CodeForbidden, "sign in from agentbox's own sign-in page")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBytes)
	if err := r.ParseForm(); err != nil {
		if bodyFailure(err) {
			return err
		}
		return badRequest("the sign-in form could not be read: %v", err)
	}
	next := localPath(r.PostFormValue("next"))
	if !s.validToken("Bearer " + r.PostFormValue("token")) {
		return s.ui.SignIn(w, r, http.StatusUnauthorized, "That token is not valid. Use the API token the server was started with (agentbox serve prints where it is).", next)
	}
	v, exp := s.view.sign(kindSess, "", SessionTTL)
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: v, Path: "/", Expires: exp, MaxAge: int(SessionTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secureCookies(r),
	})
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// logout handles POST /ui/logout: the session cookie is cleared.
func (s *server) logout(w http.ResponseWriter, r *http.Request) error {
	securePage(w.Header(), "")
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBytes)
	if _, ok := s.sessionOf(r); ok {
		if _, err := s.formSession(r); err != nil {
			return err
		}
	} else if !s.ownForm(r) { // another site's form, which the cookie does not come with
		return errorf(http.StatusForbidden, wire.CodeForbidden, "sign out from agentbox's own pages")
	}
	http.SetCookie(w, &http.Cookie{
		Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, Expires: time.Unix(1, 0),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secureCookies(r),
	})
	http.Redirect(w, r, "/", http.StatusSeeOther)
	return nil
}

// ownForm reports whether a form's POST may come from the UI's own page:
// not from another site's or origin's, as far as the browser says.
func (s *server) ownForm(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	return (site == "" || site == "same-origin") && s.sameOrigin(r, "")
}

func (s *server) secureCookies(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(s.cfg.BaseURL, "https:")
}

// localPath is p if it is a path of this server's ("/jobs/x"), else "/":
// the sign-in form's next page must not lead to another site.
func localPath(p string) string {
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") ||
		strings.ContainsAny(p, "\\\r\n\t") || !isClean(u.Path) {
		return "/"
	}
	return p
}

// page serves a UI page to a signed-in browser's top-level navigation,
// and the sign-in page to one without a session (200 at "/", 401 at any
// other page, which it comes back to once signed in).
func (s *server) page(fn func(http.ResponseWriter, *http.Request, ui.Session) error) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		securePage(w.Header(), s.frameSrc())
		if !pageRequest(r) {
			return errorf(http.StatusForbidden, wire.CodeForbidden, "agentbox's pages open in a window of their own, not inside other pages")
		}
		sess, ok := s.sessionOf(r)
		if ok {
			if err := s.fetchMetadata(r); err != nil {
				return err
			}
			return fn(w, r, ui.Session{CSRF: sess.CSRF, NoAuth: s.cfg.NoAuth})
		}
		if s.cfg.NoAuth {
			return checkLocalRequest(r)
		}
		status := http.StatusUnauthorized
		if r.URL.Path == "/" {
			status = http.StatusOK
		}
		return s.ui.SignIn(w, r, status, "", r.URL.RequestURI())
	}
}

// fragment serves a piece of a UI page (rows of the job list, a page of
// the timeline) to the UI's scripts: the route's guard has checked the
// session and its CSRF header, or a bearer token.
func (s *server) fragment(fn func(http.ResponseWriter, *http.Request) error) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		securePage(w.Header(), "")
		// A fragment's change is a click on the job page.
		return fn(w, r.WithContext(jobs.WithPrincipal(r.Context(), jobs.Principal{Name: ui.ByUI})))
	}
}
