package wiring

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/llm/models"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/ui"
	"github.com/agentbox/agentbox/internal/wire"
)

// Server is `agentbox serve` assembled: the data dir's lock, the listener,
// the job side with its workers, the retention janitor, the metrics
// registry and the API. Serve runs it; Close closes it.
type Server struct {
	cfg      config.Config
	log      *slog.Logger
	listener net.Listener
	jobs     *jobSide
	http     *http.Server
	closers
}

// OpenServer assembles the server cfg describes: it locks the data dir,
// decides the API's tokens and viewer key, listens, opens the job side and
// starts the janitor under ctx.
func OpenServer(ctx context.Context, cfg config.Config, log *slog.Logger) (*Server, error) {
	s := &Server{cfg: cfg, log: log}
	if err := s.open(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) open(ctx context.Context) error {
	cfg := s.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	s.addFunc(unlock)
	var ac api.Config
	if servesAPI(cfg.Role) {
		if ac, err = apiConfig(cfg, s.log); err != nil {
			return err
		}
	}
	if s.listener, err = listen(cfg.Server.Addr, cfg.Server.HTTP, s.log); err != nil {
		return err
	}
	s.addFunc(func() { s.listener.Close() }) // closed already once served
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := s.openJobs(ctx, reg); err != nil {
		return err
	}
	// Only a worker serves the internal endpoint: made on a node that
	// serves the API it went unused, and warned that it had no cluster
	// secret on every single-node server.
	var handler http.Handler
	if servesAPI(cfg.Role) {
		self := ""
		if runsJobs(cfg.Role) {
			self = workerID(cfg.DataDir)
		}
		handler = api.New(ac, apiService(cfg, s.jobs, self, s.log), reg, s.log)
	} else {
		handler = api.UploadDeadline(workerHandler(cfg, s.jobs, reg, s.log), cfg.Server.HTTP.BodyTimeout, cfg.Server.HTTP.MinUploadRate)
	}
	s.serveHTTP(ctx, handler)
	return nil
}

// apiConfig decides the API's tokens, viewer key and highlighter.
func apiConfig(cfg config.Config, log *slog.Logger) (api.Config, error) {
	tokens, err := serverTokens(cfg, log)
	if err != nil {
		return api.Config{}, err
	}
	viewerKey, err := viewerKey(cfg, log)
	if err != nil {
		return api.Config{}, err
	}
	return api.Config{Tokens: tokens, NoAuth: cfg.Server.NoAuth, BaseURL: cfg.Server.PublicURL, MaxUploadBytes: cfg.Server.MaxUpload,
		ViewerKey: viewerKey, ViewURL: cfg.Server.ViewURL, Highlight: ui.Highlight{Command: highlighter(cfg)},
		BodyTimeout: cfg.Server.HTTP.BodyTimeout, MinUploadRate: cfg.Server.HTTP.MinUploadRate, Defaults: Defaults(cfg)}, nil
}

// Defaults are the model and limits the server applies to a job that
// names none: the jobs' effective ones in the API, the new-job form's
// placeholders.
func Defaults(cfg config.Config) *wire.Effective {
	d := &wire.Effective{Limits: wire.Limits{
		Timeout: wire.Duration(cfg.Server.JobTimeout), MaxSteps: cfg.Agent.MaxSteps,
		Memory: wire.ByteSize(cfg.Sandbox.MemoryBytes), CPUs: float64(cfg.Sandbox.NanoCPUs) / 1e9,
		Disk: wire.ByteSize(cfg.Sandbox.DiskBytes), ContextWindow: cfg.Agent.ContextWindow,
	}}
	if cfg.Agent.Kind == "shell" {
		d.Limits.MaxSteps = 0 // a script is one step
		return d
	}
	d.Model = models.DefaultSpec(cfg.Model)
	return d
}

// highlighter is the agentbox binary the UI's file viewer runs as its
// highlighter: the guest binary, which is agentbox (and, in a test
// process, the one that is: the test binary is not), else this one.
func highlighter(cfg config.Config) string {
	if cfg.Sandbox.GuestBinary != "" {
		return cfg.Sandbox.GuestBinary
	}
	exe, _ := os.Executable()
	return exe
}

// openJobs opens the job side for cfg's role: an API replica has no
// scheduler, but follows the store's notes (its feed) and requeues the
// jobs of dead workers (its reaper); a worker's scheduler claims and runs
// jobs and registers it. The retention janitor runs where the API does.
func (s *Server) openJobs(ctx context.Context, reg *prometheus.Registry) error {
	cfg := s.cfg
	sc := jobs.SchedulerConfig{WorkerID: workerID(cfg.DataDir), Concurrency: cfg.Server.Concurrency, Lease: cfg.Server.Lease,
		DefaultTimeout: cfg.Server.JobTimeout, MaxOutputEvents: cfg.Server.LiveOutputMax, Grace: schedulerGrace(cfg.Server.Grace), Log: s.log,
		Address: advertiseAddr(cfg, s.listener.Addr())}
	if !runsJobs(cfg.Role) {
		sc.Concurrency = 0
	}
	j, err := openJobs(ctx, cfg, s.log, jobsConfig{dir: cfg.DataDir, store: cfg.Store, workers: true, noDriver: !runsJobs(cfg.Role),
		metrics: reg, maxAttempts: cfg.Server.MaxAttempts, ceilings: &cfg.Sandbox.Ceilings, sched: sc, blobs: true, server: s.listener.Addr()})
	if err != nil {
		return err
	}
	s.jobs = j
	s.add(j.Close)
	if servesAPI(cfg.Role) {
		janitor := jobs.NewJanitor(j.service, jobs.JanitorConfig{Retention: cfg.Server.Retention, Log: s.log})
		janitor.Start(ctx)
		s.addFunc(janitor.Close)
	}
	if runsJobs(cfg.Role) {
		s.removePartial(ctx)
		jobs.RegisterDiskMetrics(reg, cfg.DataDir, cfg.Sandbox.MinFreeDisk, docker.DiskFree)
	}
	return nil
}

// removePartial removes what uploads and copies a crash cut short left
// beside the workspaces. No upload is under way yet: the API is not
// serving, and the data dir is locked.
func (s *Server) removePartial(ctx context.Context) {
	removed, err := s.jobs.workspaces.RemovePartial(ctx)
	if len(removed) > 0 {
		s.log.Info("removed the partial workspaces a crash left", "paths", removed)
	}
	if err != nil {
		s.log.Error("remove partial workspaces", "err", err)
	}
}

// serveHTTP makes the HTTP server over h (the API, or a worker's
// endpoints). Long-lived requests (event streams, the
// desktop's and Jupyter's WebSockets) end when shutdown begins, so they do
// not hold it up; clients resume from Last-Event-ID, noVNC reconnects. No
// ReadTimeout or WriteTimeout: they would cut streams and large downloads
// (the proxy clears them for WebSockets anyway); request bodies get a
// deadline of their own (api.Config.BodyTimeout), and each write one of its
// own from the listener (AGENTBOX_HTTP_WRITE_TIMEOUT), which a client that
// keeps reading never meets. The sandboxes' desktop and
// Jupyter are reached through the service's Guest: no container port is
// ever published.
func (s *Server) serveHTTP(ctx context.Context, h http.Handler) {
	baseCtx, endStreams := context.WithCancel(context.WithoutCancel(ctx))
	s.addFunc(endStreams)
	s.http = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: s.cfg.Server.HTTP.HeaderTimeout,
		IdleTimeout:       s.cfg.Server.HTTP.IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
	}
	s.http.RegisterOnShutdown(endStreams)
}

// Serve serves until ctx ends, lets the scheduler wind down (the API keeps
// answering meanwhile, so clients see jobs finish), then stops HTTP. If
// HTTP fails first, the scheduler is wound down the same way.
func (s *Server) Serve(ctx context.Context) error {
	cfg := s.cfg
	s.log.Info("agentbox serving", "role", cfg.Role, "addr", "http://"+s.listener.Addr().String(), "data_dir", cfg.DataDir,
		"concurrency", s.jobs.capacity(), "auth", !cfg.Server.NoAuth, "agent", cfg.Agent.Kind)
	if runsJobs(cfg.Role) && cfg.Agent.Kind == "model" && !cfg.Model.Configured() {
		s.log.Warn("no model configured: agent jobs are refused (400 no_model) until one is (set ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL and restart; see docs/models.md)")
	}
	return runServer(ctx, s.http, s.listener, s.jobs)
}

// runServer is Serve's body.
func runServer(ctx context.Context, srv *http.Server, l net.Listener, j *jobSide) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	httpErr := make(chan error, 1)
	go func() {
		err := srv.Serve(l)
		stop(fmt.Errorf("http: %w", err))
		httpErr <- err
	}()
	j.run(ctx)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		srv.Close() // requests still open must not outlive the store
	}
	if herr := <-httpErr; !errors.Is(herr, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", herr)
	}
	return err
}

// schedulerGrace maps the configured grace (0 = none) to the scheduler's
// (0 = default, negative = none).
func schedulerGrace(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// workerID is stable across restarts of the server on one data dir, so a
// restarted server reclaims the jobs its previous life held at once.
func workerID(dataDir string) string {
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(dataDir))
	return host + "-" + hex.EncodeToString(sum[:4])
}
