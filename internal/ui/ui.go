// Package ui is agentbox's web UI: pages rendered on the server with
// html/template from the same service the REST API uses, and small
// scripts of our own (static/) that keep them live through the API
// itself. Everything is embedded in the binary; no page loads anything
// from another origin, and no build step or Node toolchain is involved.
//
// Package api owns the routes, sessions and their checks (a page's
// handler here runs only for a signed-in browser's top-level navigation;
// see api's session.go) and sets the security headers. This package
// renders: full pages (Jobs, NewJob, Job, SignIn, Error) and the
// fragments the scripts fetch to update them (Rows), so each piece of
// HTML has one template whether it comes with the page or later.
package ui

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
	"github.com/agentbox/agentbox/internal/workspace"
)

//go:embed templates static
var files embed.FS

// Service is what the UI reads; *jobs.Service implements it.
type Service interface {
	Get(ctx context.Context, id string) (store.Job, error)
	List(ctx context.Context, opts store.ListOptions) (store.JobPage, error)
	Events(ctx context.Context, id string, after int64, limit int) ([]store.Event, error)
	Workspace(ctx context.Context, id string) (workspace.Store, error)
	Diff(ctx context.Context, id string, patch bool, w io.Writer) error
}

// Config is the UI's configuration.
type Config struct {
	// FrameSrc is the CSP source of the jobs' desktop and Jupyter origins
	// when they have their own (the job page then shows them in a frame);
	// empty when they share the API's origin (the job page opens them in a
	// window of their own: a frame of the same origin could read the page).
	FrameSrc string
	// NoAuth: the server runs without a token; there is no sign-in.
	NoAuth bool
	// Now is the clock ages are shown against; nil means time.Now.
	Now func() time.Time
	// MediaKey is the key a job's image URLs carry (?k=), which the API
	// asks of an <img> with the session: pages of the API's origin that
	// cannot read the job's UI cannot make them. nil: none.
	MediaKey func(jobID string) string
	// Highlight is how the file viewer highlights; its zero value shows
	// files as plain text.
	Highlight Highlight
	// Defaults are the model and limits the server applies to a job that
	// names none: the new-job form's placeholders, and what a job page
	// shows of what it runs with. nil: the form shows no placeholders.
	Defaults *wire.Effective
}

// Session is what a page knows of its viewer's session.
type Session struct {
	// CSRF is the session's token for the page's requests (X-CSRF-Token).
	CSRF   string
	NoAuth bool
}

// UI renders the pages.
type UI struct {
	cfg    Config
	svc    Service
	log    *slog.Logger
	hl     *highlighter // the file viewer's
	pages  map[string]*template.Template
	static fs.FS
	etags  map[string]string // static file -> strong ETag
	// version changes with any static file, so pages ask for new ones.
	version string
}

// New parses the templates; it panics on a broken one (they are
// embedded, so a test catches it).
func New(cfg Config, svc Service, log *slog.Logger) *UI {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	u := &UI{cfg: cfg, svc: svc, log: log, hl: newHighlighter(cfg.Highlight, log), pages: map[string]*template.Template{}, etags: map[string]string{}}
	u.static, _ = fs.Sub(files, "static")
	all := sha256.New()
	_ = fs.WalkDir(u.static, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := fs.ReadFile(u.static, p)
		sum := sha256.Sum256(b)
		u.etags[p] = `"` + hex.EncodeToString(sum[:8]) + `"`
		all.Write(sum[:])
		return nil
	})
	u.version = hex.EncodeToString(all.Sum(nil)[:6])
	base := template.Must(template.New("").Funcs(u.funcs()).ParseFS(files, "templates/layout.html", "templates/parts/*.html"))
	pages, _ := fs.Glob(files, "templates/*.html")
	for _, p := range pages {
		name := strings.TrimSuffix(path.Base(p), ".html")
		if name == "layout" {
			continue
		}
		u.pages[name] = template.Must(template.Must(base.Clone()).ParseFS(files, p))
	}
	return u
}

// pageData is what every page's layout reads.
type pageData struct {
	Title   string
	Nav     string // the nav entry to mark current
	Session Session
	Version string
	Scripts []string // module scripts under /ui/static/
	// FrameSrc: see Config.
	FrameSrc string
	Data     any
}

// render writes page name with status. Rendering goes to a buffer first,
// so a template error is a clean 500, never half a page.
func (u *UI) render(w http.ResponseWriter, status int, name string, d pageData) error {
	t, ok := u.pages[name]
	if !ok {
		panic("ui: no page " + name)
	}
	d.Version, d.FrameSrc = u.version, u.cfg.FrameSrc
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", d); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, err := buf.WriteTo(w)
	return err
}

// fragment writes the named template of page name alone.
func (u *UI) fragment(w http.ResponseWriter, page, name string, data any) error {
	var buf bytes.Buffer
	if err := u.pages[page].ExecuteTemplate(&buf, name, data); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, err := buf.WriteTo(w)
	return err
}

// SignIn writes the sign-in page: status, an error message if any, and
// the page to go to once signed in.
func (u *UI) SignIn(w http.ResponseWriter, _ *http.Request, status int, message, next string) error {
	return u.render(w, status, "signin", pageData{Title: "Sign in", Data: struct{ Message, Next string }{message, next}})
}

// Error writes an error page.
func (u *UI) Error(w http.ResponseWriter, status int, message string) {
	if err := u.render(w, status, "error", pageData{Title: http.StatusText(status), Data: struct {
		Status  int
		Text    string
		Message string
	}{status, http.StatusText(status), message}}); err != nil {
		u.log.Error("ui: error page", "err", err)
	}
}

// Static serves GET /ui/static/{file...}: the embedded scripts and
// styles, revalidated by ETag.
func (u *UI) Static(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("file")
	etag, ok := u.etags[name]
	if !ok {
		http.NotFound(w, r)
		return nil
	}
	f, err := u.static.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	http.ServeContent(w, r, name, time.Time{}, f.(io.ReadSeeker))
	return nil
}
