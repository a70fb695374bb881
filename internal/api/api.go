// Package api owns agentbox's HTTP API: routes on a standard ServeMux, the
// conversion of domain types to the wire format (package wire holds the
// request and response bodies), bearer-token auth, input limits, the
// mapping of service errors to statuses, the SSE event stream, workspace
// downloads, and the reverse proxy to each running job's desktop and
// Jupyter, with the signed viewer links and cookies browsers use for it.
// openapi.json, embedded here, describes all of it and is tested against it.
package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbox/agentbox/internal/artifact"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/ui"
	"github.com/agentbox/agentbox/internal/wire"
	"github.com/agentbox/agentbox/internal/workspace"
)

// Defaults of Config's zero fields.
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultKeepAlive    = 15 * time.Second
	DefaultPoll         = 2 * time.Second
	DefaultBodyTimeout  = 30 * time.Second
	// DefaultMinUploadRate is in bytes a second.
	DefaultMinUploadRate = 32 << 10
)

// Config is the API's configuration.
type Config struct {
	// Tokens are the accepted bearer tokens. With none and NoAuth unset,
	// every request but /healthz is refused.
	Tokens []string
	// NoAuth turns token checks off. The serve command allows it only on a
	// loopback address; requests must then name a loopback Host (no DNS
	// rebinding from a web page).
	NoAuth bool
	// MaxBodyBytes caps request bodies (413 beyond). Default 1 MiB.
	MaxBodyBytes int64
	// MaxUploadBytes caps a multipart submission's workspace part, as sent
	// (compressed): the whole body may be this, MaxBodyBytes and 64 MiB of
	// archive overhead (413 beyond). Default 1 GiB. What the workspace may
	// unpack to is the service's limit (jobs.ServiceConfig.MaxUpload).
	MaxUploadBytes int64
	// BaseURL, e.g. "https://agentbox.example.com", makes links absolute;
	// empty gives root-relative links.
	BaseURL string
	// KeepAlive is the interval of SSE keep-alive comments. Default 15s.
	KeepAlive time.Duration
	// Poll bounds how long an SSE stream waits before re-reading the store,
	// for events written by another server process. Default 2s.
	Poll time.Duration
	// BodyTimeout is how long a request's body may take to arrive, from
	// the end of its headers (408 beyond, and the connection is closed);
	// requests without a body are not bounded by it. Default 30s.
	BodyTimeout time.Duration
	// MinUploadRate is the average rate, in bytes a second, an upload (a
	// multipart submission, a body sent to a job's desktop or Jupyter)
	// keeps up after its first BodyTimeout, in place of BodyTimeout; it
	// may not pause longer than BodyTimeout either. Default 32 KiB/s.
	MinUploadRate int64
	// MaxStreams caps concurrent SSE streams server-wide (503 beyond), as
	// each holds a goroutine and polls the store. Default 256.
	MaxStreams int
	// ViewerKey signs viewer tickets and cookies (HMAC-SHA256); at least 32
	// bytes. With the same key, a restarted server (or another replica)
	// honors this one's viewer cookies. Redeemed tickets are remembered in
	// memory, per instance: a restarted server refuses tickets issued before
	// it started, and replicas sharing a key could each accept a ticket once
	// in its minute. Empty: 32 random bytes per API instance, so nothing
	// survives a restart.
	ViewerKey []byte
	// ViewURL gives each job's desktop and Jupyter an origin of their own:
	// a template "http(s)://{job}.DOMAIN[:PORT]" (see CheckViewURL), served
	// by this handler under a wildcard DNS name. Viewer links and cookies
	// then work on the job's host only, and the API's own host serves the
	// views to bearer-token clients (programs) only. Empty: the views are
	// served on the API's origin.
	ViewURL string
	// Now is the clock viewer tickets and cookies are checked against;
	// nil means time.Now. Tests set it.
	Now func() time.Time
	// Highlight is how the web UI's file viewer highlights files (a child
	// process of the agentbox binary for each); its zero value shows them
	// as plain text.
	Highlight ui.Highlight
	// Defaults are the model and limits the server applies to a job that
	// names none: jobs are answered with their effective ones, and the
	// UI's new-job form shows them. nil: neither.
	Defaults *wire.Effective
}

func (c Config) withDefaults() Config {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxUploadBytes <= 0 {
		c.MaxUploadBytes = config.Default().Server.MaxUpload // AGENTBOX_MAX_UPLOAD
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.Poll <= 0 {
		c.Poll = DefaultPoll
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.MinUploadRate <= 0 {
		c.MinUploadRate = DefaultMinUploadRate
	}
	if c.MaxStreams <= 0 {
		c.MaxStreams = 256
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Service is what the API needs of internal/jobs; *jobs.Service implements it.
type Service interface {
	Submit(ctx context.Context, req jobs.SubmitRequest) (store.Job, bool, error)
	Get(ctx context.Context, id string) (store.Job, error)
	List(ctx context.Context, opts store.ListOptions) (store.JobPage, error)
	Cancel(ctx context.Context, id string) (store.Job, error)
	Events(ctx context.Context, id string, after int64, limit int) ([]store.Event, error)
	WaitEvents(ctx context.Context, id string, after int64, poll time.Duration) error
	Workspace(ctx context.Context, id string) (workspace.Store, error)
	Artifacts(ctx context.Context, id string, w io.Writer, opts artifact.Options) (artifact.Report, error)
	Diff(ctx context.Context, id string, patch bool, w io.Writer) error
	QueuePosition(ctx context.Context, id string) (int, error)
	Workers(ctx context.Context) ([]jobs.WorkerStatus, error)
	// SetNetwork and Network are a job's egress policy and what its
	// sandbox did on the network.
	SetNetwork(ctx context.Context, id string, p egress.Policy) (egress.Policy, error)
	Network(ctx context.Context, id string) (jobs.NetworkSummary, error)
	Sandboxes
}

// Uploads makes the workspace a multipart submission brings before its
// job is submitted (see jobs.Service.Stage): an optional ability of a
// Service, without which multipart submissions are refused.
type Uploads interface {
	Check(req jobs.SubmitRequest, upload bool) error
	Stage(ctx context.Context, u jobs.Upload) (*jobs.Staged, error)
	Discard(ctx context.Context, st *jobs.Staged) error
}

// Sandboxes reaches the guest of a running job's sandbox, for the desktop
// and Jupyter proxy. Guest returns store.ErrNotFound for an unknown job
// and jobs.ErrNoSandbox when the job has no running sandbox. The client
// belongs to the job's worker: the API only borrows its Transport.
type Sandboxes interface {
	Guest(ctx context.Context, jobID string) (*guest.Client, error)
}

var (
	_ Service = (*jobs.Service)(nil)
	_ Uploads = (*jobs.Service)(nil)
)

// server holds the handlers' dependencies.
type server struct {
	cfg     Config
	svc     Service
	log     *slog.Logger
	prom    http.Handler
	metrics *httpMetrics
	tokens  [][32]byte // sha256 of each accepted token
	mux     *http.ServeMux
	unclean http.Handler
	streams chan struct{} // one token per open SSE stream
	view    *signer       // viewer tickets and cookies
	views   *viewHosts    // per-job view origins; nil: the API's origin
	ui      *ui.UI        // the web UI's pages
}

// New returns the API handler. reg is served at /metrics (the job
// collectors are registered on it by internal/jobs); the API adds its HTTP
// request metrics to it. A nil reg gets a fresh registry.
func New(cfg Config, svc Service, reg *prometheus.Registry, log *slog.Logger) http.Handler {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &server{cfg: cfg.withDefaults(), svc: svc, log: log, prom: newPromHandler(reg), metrics: newHTTPMetrics(reg)}
	s.tokens = hashTokens(cfg.Tokens)
	s.streams = make(chan struct{}, s.cfg.MaxStreams)
	s.view = newSigner(s.cfg.ViewerKey, s.cfg.Now)
	views, err := parseViewURL(cfg.ViewURL)
	if err != nil {
		panic("api.New: " + err.Error() + " (check it with CheckViewURL first)")
	}
	s.views = views
	s.ui = ui.New(ui.Config{FrameSrc: s.frameSrc(), NoAuth: cfg.NoAuth, Now: s.cfg.Now, MediaKey: s.mediaKey, Highlight: cfg.Highlight,
		Defaults: cfg.Defaults}, svc, log)
	if len(s.tokens) == 0 && !cfg.NoAuth {
		log.Warn("api: no token configured and auth not disabled; every request but /healthz will be refused")
	}
	s.mux = s.newMux()
	s.unclean = s.wrap(route{pattern: "unmatched", auth: authBearer, h: func(http.ResponseWriter, *http.Request) error {
		return badRequest("request path must be clean: no '.' or '..' segments, no repeated slashes")
	}})
	return s
}

// ServeHTTP puts the request's body under its deadline, refuses unclean paths with a JSON 400 (ServeMux would redirect
// them, which turns a traversal attempt into a 301) and routes the rest.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	limitBody(w, r, s.cfg.BodyTimeout)
	if !isClean(r.URL.Path) {
		s.unclean.ServeHTTP(w, r)
		return
	}
	if s.confineViewHost(w, r) {
		return
	}
	s.mux.ServeHTTP(w, r)
}

func isClean(p string) bool {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

// handlerFunc is a handler that returns its error for wrap to encode.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// authMode is what a route accepts as credentials.
type authMode int

const (
	authNone   authMode = iota // nothing
	authBearer                 // a bearer token
	// authViewer is a bearer token, a viewer ticket or the job's viewer
	// cookie; the handler checks it (see admit), as a ticket is answered
	// with a redirect.
	authViewer
	// authDownload is authBearer, or the UI's link to an attachment
	// (see apiSession).
	authDownload
	// authPage is a page of the web UI: its session, or the sign-in page
	// (see page).
	authPage
	// authImage is authBearer, or the UI's job page loading one of the
	// job's images with <img> (see imageSession).
	authImage
)

// route is one entry of the API: its ServeMux pattern, the credentials it
// needs, and its handler.
type route struct {
	pattern string // "METHOD /path"
	auth    authMode
	h       handlerFunc
}

// routes is the API's route table, the one list the mux and the OpenAPI
// test are built from.
func (s *server) routes() []route {
	rs := []route{
		{"GET /healthz", authNone, s.health},
		{"GET /metrics", authBearer, s.serveMetrics},
		{"GET /v1/openapi.json", authBearer, serveOpenAPI},
		{"POST /v1/jobs", authBearer, s.submit},
		{"GET /v1/jobs", authBearer, s.list},
		{"GET /v1/jobs/{id}", authBearer, s.get},
		{"DELETE /v1/jobs/{id}", authBearer, s.deleteJob},
		{"POST /v1/jobs/{id}/cancel", authBearer, s.cancel},
		{"POST /v1/jobs/{id}/messages", authBearer, s.reply},
		{"GET /v1/jobs/{id}/events", authBearer, s.events},
		{"GET /v1/jobs/{id}/artifacts.zip", authDownload, s.artifacts},
		{"GET /v1/jobs/{id}/files/{path...}", authDownload, s.file},
		{"GET /v1/jobs/{id}/diff", authBearer, s.diff},
		{"GET /v1/jobs/{id}/media/{name}", authImage, s.media},
		{"POST /v1/jobs/{id}/viewer", authBearer, s.viewer},
		{"GET /v1/jobs/{id}/network", authBearer, s.network},
		{"PATCH /v1/jobs/{id}/network", authBearer, s.setNetwork},
		{"GET /v1/workers", authBearer, s.workers},
		{"POST /schedule", authBearer, s.legacySubmit},
		{"POST /submit", authBearer, s.legacySubmit},
		{"GET /status/{id}", authBearer, s.legacyStatus},
	}
	for _, svc := range []string{guest.ServiceDesktop, guest.ServiceJupyter} {
		// The bare path only adds the slash, so relative links resolve.
		rs = append(rs, route{"GET /v1/jobs/{id}/" + svc, authNone, addSlash})
		for _, m := range proxyMethods {
			rs = append(rs, route{m + " /v1/jobs/{id}/" + svc + "/{path...}", authViewer, s.proxy(svc)})
		}
	}
	return rs
}

// uiRoutes are the web UI's pages and assets (internal/ui), apart from
// the API's routes: the OpenAPI document does not describe them.
func (s *server) uiRoutes() []route {
	return []route{
		{"GET /{$}", authPage, s.page(s.ui.Jobs)},
		{"GET /new", authPage, s.page(s.ui.NewJob)},
		{"GET /jobs/{id}", authPage, s.page(s.ui.Job)},
		{"GET /ui/rows", authBearer, s.fragment(s.ui.Rows)},
		{"GET /ui/jobs/{id}/tree", authBearer, s.fragment(s.ui.Tree)},
		{"GET /ui/jobs/{id}/view", authBearer, s.fragment(s.ui.View)},
		{"GET /ui/jobs/{id}/diff", authBearer, s.fragment(s.ui.Diff)},
		{"GET /ui/jobs/{id}/timeline", authBearer, s.fragment(s.ui.Timeline)},
		{"GET /ui/jobs/{id}/header", authBearer, s.fragment(s.ui.JobHeader)},
		{"GET /ui/jobs/{id}/network", authBearer, s.fragment(s.ui.Network)},
		{"POST /ui/jobs/{id}/network/allow", authBearer, s.fragment(s.ui.AllowHost)},
		{"POST /ui/login", authNone, s.login},
		{"POST /ui/logout", authNone, s.logout},
		{"GET /ui/static/{file...}", authNone, s.ui.Static},
	}
}

// newMux registers every route, a JSON 405 (with Allow) for the other
// methods of each path, and a JSON 404 for everything else.
func (s *server) newMux() *http.ServeMux {
	mux := http.NewServeMux()
	allow := map[string][]string{}
	var paths []string
	for _, rt := range append(s.routes(), s.uiRoutes()...) {
		mux.Handle(rt.pattern, s.wrap(rt))
		method, p, _ := strings.Cut(rt.pattern, " ")
		if allow[p] == nil {
			paths = append(paths, p)
		}
		allow[p] = append(allow[p], method)
	}
	for _, p := range paths {
		methods := strings.Join(allow[p], ", ")
		mux.Handle(p, s.wrap(route{pattern: "unmatched", auth: authBearer, h: func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Allow", methods)
			return errorf(http.StatusMethodNotAllowed, wire.CodeMethodNotAllowed, "%s is not allowed on %s; use %s", r.Method, p, methods)
		}}))
	}
	mux.Handle("/", s.wrap(route{pattern: "unmatched", auth: authBearer, h: func(w http.ResponseWriter, r *http.Request) error {
		return errorf(http.StatusNotFound, wire.CodeNotFound, "no route %s %s", r.Method, r.URL.Path)
	}}))
	return mux
}

func (s *server) health(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, wire.Health{Status: "ok"})
	return nil
}
