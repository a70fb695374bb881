// Package api owns agentbox's HTTP API: routes on a standard ServeMux, the
// DTOs of the wire format, bearer-token auth, input limits, the mapping of
// service errors to statuses, the SSE event stream and workspace downloads.
// openapi.json, embedded here, describes all of it and is tested against it.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
)

// Defaults of Config's zero fields.
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultKeepAlive    = 15 * time.Second
	DefaultPoll         = 2 * time.Second
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
	// BaseURL, e.g. "https://agentbox.example.com", makes links absolute;
	// empty gives root-relative links.
	BaseURL string
	// KeepAlive is the interval of SSE keep-alive comments. Default 15s.
	KeepAlive time.Duration
	// Poll bounds how long an SSE stream waits before re-reading the store,
	// for events written by another server process. Default 2s.
	Poll time.Duration
	// MaxStreams caps concurrent SSE streams server-wide (503 beyond), as
	// each holds a goroutine and polls the store. Default 256.
	MaxStreams int
}

func (c Config) withDefaults() Config {
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.KeepAlive <= 0 {
		c.KeepAlive = DefaultKeepAlive
	}
	if c.Poll <= 0 {
		c.Poll = DefaultPoll
	}
	if c.MaxStreams <= 0 {
		c.MaxStreams = 256
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
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
	Workspace(ctx context.Context, id string) (string, error)
}

var _ Service = (*jobs.Service)(nil)

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
	if len(s.tokens) == 0 && !cfg.NoAuth {
		log.Warn("api: no token configured and auth not disabled; every request but /healthz will be refused")
	}
	s.mux = s.newMux()
	s.unclean = s.wrap(route{pattern: "unmatched", auth: true, h: func(http.ResponseWriter, *http.Request) error {
		return badRequest("request path must be clean: no '.' or '..' segments, no repeated slashes")
	}})
	return s
}

// ServeHTTP refuses unclean paths with a JSON 400 (ServeMux would redirect
// them, which turns a traversal attempt into a 301) and routes the rest.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !isClean(r.URL.Path) {
		s.unclean.ServeHTTP(w, r)
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

// route is one entry of the API: its ServeMux pattern, whether it needs a
// token, and its handler.
type route struct {
	pattern string // "METHOD /path"
	auth    bool
	h       handlerFunc
}

// routes is the API's route table, the one list the mux and the OpenAPI
// test are built from.
func (s *server) routes() []route {
	return []route{
		{"GET /healthz", false, s.health},
		{"GET /metrics", true, s.serveMetrics},
		{"GET /v1/openapi.json", true, serveOpenAPI},
		{"POST /v1/jobs", true, s.submit},
		{"GET /v1/jobs", true, s.list},
		{"GET /v1/jobs/{id}", true, s.get},
		{"POST /v1/jobs/{id}/cancel", true, s.cancel},
		{"GET /v1/jobs/{id}/events", true, s.events},
		{"GET /v1/jobs/{id}/artifacts.zip", true, s.artifacts},
		{"GET /v1/jobs/{id}/files/{path...}", true, s.file},
		{"POST /schedule", true, s.legacySubmit},
		{"POST /submit", true, s.legacySubmit},
		{"GET /status/{id}", true, s.legacyStatus},
	}
}

// newMux registers every route, a JSON 405 (with Allow) for the other
// methods of each path, and a JSON 404 for everything else.
func (s *server) newMux() *http.ServeMux {
	mux := http.NewServeMux()
	allow := map[string][]string{}
	var paths []string
	for _, rt := range s.routes() {
		mux.Handle(rt.pattern, s.wrap(rt))
		method, p, _ := strings.Cut(rt.pattern, " ")
		if allow[p] == nil {
			paths = append(paths, p)
		}
		allow[p] = append(allow[p], method)
	}
	for _, p := range paths {
		methods := strings.Join(allow[p], ", ")
		mux.Handle(p, s.wrap(route{pattern: "unmatched", auth: true, h: func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Allow", methods)
			return errorf(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s is not allowed on %s; use %s", r.Method, p, methods)
		}}))
	}
	mux.Handle("/", s.wrap(route{pattern: "unmatched", auth: true, h: func(w http.ResponseWriter, r *http.Request) error {
		return errorf(http.StatusNotFound, CodeNotFound, "no route %s %s", r.Method, r.URL.Path)
	}}))
	return mux
}

func (s *server) health(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, Health{Status: "ok"})
	return nil
}
