package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/lockfile"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/workspace"
)

func newServeCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the orchestrator: REST API, job store, scheduler and sandbox workers",
		Long: `serve runs the agentbox server: the REST API under /v1 (see docs/api.md), a
durable job store (SQLite in the data dir), and a pool of workers that claim
jobs with a lease, run each in a fresh sandbox, and record every step as an
event.

Auth: every route but /healthz needs a bearer token. Give one in
AGENTBOX_TOKEN or a file in AGENTBOX_TOKEN_FILE; without either, a token is
generated on first start into <data dir>/token (mode 0600) and its path is
logged. --no-auth turns auth off, on a loopback address only. A running job's
desktop and Jupyter open in a browser with a one-time link from
'agentbox view JOB_ID', which never carries the token; the link's cookie is
signed with <data dir>/viewer.key (or AGENTBOX_VIEWER_KEY_FILE), so it
outlives a restart.

On SIGTERM or Ctrl-C serve stops claiming jobs, gives running jobs the grace
period, then stops them and hands them back (pending) for the next start.`,
		Example: `  agentbox serve
  agentbox serve --addr 0.0.0.0:8080 --data-dir /srv/agentbox --concurrency 4
  AGENTBOX_TOKEN=secret agentbox serve`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.flagSet = cmd.Flags().Changed
			return a.serve(cmd.Context())
		},
	}
	s := &a.flagCfg.Server
	f := cmd.Flags()
	f.StringVar(&s.Addr, "addr", "", "listen address (AGENTBOX_ADDR; default 127.0.0.1:8080)")
	f.StringVar(&a.flagCfg.DataDir, "data-dir", "", "data directory (AGENTBOX_DATA_DIR; default ~/.local/share/agentbox)")
	f.IntVar(&s.Concurrency, "concurrency", 0, "jobs run at once; 0 serves the API only (AGENTBOX_CONCURRENCY; default 2)")
	f.BoolVar(&s.NoAuth, "no-auth", false, "turn auth off (loopback addresses only)")
	f.DurationVar(&s.Lease, "lease", 0, "job lease without a heartbeat (AGENTBOX_LEASE; default 30s)")
	f.DurationVar(&s.JobTimeout, "job-timeout", 0, "default job timeout (AGENTBOX_JOB_TIMEOUT; default 30m)")
	f.DurationVar(&s.Grace, "grace", 0, "time running jobs get on shutdown; 0 stops them at once (AGENTBOX_GRACE; default 30s)")
	f.StringVar(&s.PublicURL, "public-url", "", "where clients reach the server, e.g. https://agentbox.example.com behind a TLS proxy: links are made absolute with it and viewer cookies are Secure with https (AGENTBOX_PUBLIC_URL)")
	f.StringVar(&s.ViewURL, "view-url", "", "give each job's desktop and Jupyter an origin of their own, e.g. https://{job}.view.example.com (a wildcard DNS name reaching this server), or http://{job}.localhost:8080 on one machine: a sandbox's pages then cannot reach other jobs' views or the API from the browser (AGENTBOX_VIEW_URL)")
	f.StringVar(&a.flagCfg.Agent.Kind, "agent", "", "what works on jobs: model (a language model with tools) or shell (the task as a bash script) (AGENTBOX_AGENT; default model)")
	a.driverFlag(cmd)
	return cmd
}

// applyServeFlags lets flags given on the command line win over the environment.
func (a *app) applyServeFlags() error {
	f, c := a.flagCfg.Server, &a.cfg.Server
	if a.flagSet == nil {
		a.flagSet = func(string) bool { return false }
	}
	if f.Addr != "" {
		c.Addr = f.Addr
	}
	if a.flagCfg.DataDir != "" {
		dir, err := absPath(a.flagCfg.DataDir)
		if err != nil {
			return err
		}
		a.cfg.DataDir = dir
	}
	if a.flagSet("concurrency") {
		c.Concurrency = f.Concurrency
	}
	c.NoAuth = c.NoAuth || f.NoAuth
	if f.Lease > 0 {
		c.Lease = f.Lease
	}
	if f.JobTimeout > 0 {
		c.JobTimeout = f.JobTimeout
	}
	if a.flagSet("grace") {
		c.Grace = f.Grace
	}
	if k := a.flagCfg.Agent.Kind; k != "" {
		a.cfg.Agent.Kind = k
	}
	if f.PublicURL != "" {
		c.PublicURL = f.PublicURL
	}
	if f.ViewURL != "" {
		c.ViewURL = f.ViewURL
	}
	if err := api.CheckViewURL(c.ViewURL); err != nil {
		return err
	}
	if c.ViewURL != "" {
		if c.NoAuth && !api.LocalViewURL(c.ViewURL) {
			return fmt.Errorf("view URL %q: without auth, views are served on loopback names only, such as http://{job}.localhost:8080", c.ViewURL)
		}
		if u, err := url.Parse(c.PublicURL); c.PublicURL != "" && err == nil && api.OnViewDomain(c.ViewURL, u.Host) {
			return fmt.Errorf("view URL %q: the public URL %s is under the views' domain; the API needs a host outside it", c.ViewURL, c.PublicURL)
		}
	}
	return a.cfg.Validate()
}

func (a *app) serve(ctx context.Context) error {
	if err := a.applyServeFlags(); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	cfg := a.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	defer unlock()
	tokens, err := a.serverTokens()
	if err != nil {
		return err
	}
	viewerKey, err := a.viewerKey()
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", cfg.Server.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(cfg.DataDir, "agentbox.db"), sqlite.Options{})
	if err != nil {
		l.Close()
		return fmt.Errorf("open store: %w", err)
	}
	defer st.Close()
	drv, err := a.newDriverFor(cfg.Server.Concurrency)
	if err != nil {
		l.Close()
		return err
	}
	defer drv.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ws := workspace.NewLocal(cfg.DataDir)
	sched := jobs.NewScheduler(jobs.SchedulerConfig{
		WorkerID: workerID(cfg.DataDir), Concurrency: cfg.Server.Concurrency, Lease: cfg.Server.Lease,
		DefaultTimeout: cfg.Server.JobTimeout, Grace: schedulerGrace(cfg.Server.Grace), Workspaces: ws, Log: a.log,
	}, st, drv, a.newJobAgent(), jobs.NewMetrics(reg, st))
	svc := jobs.NewService(st, ws, cfg.Server.MaxAttempts, sched)
	svc.SetCeilings(cfg.Sandbox.Ceilings)
	janitor := jobs.NewJanitor(svc, jobs.JanitorConfig{Retention: cfg.Server.Retention, Log: a.log})
	janitor.Start(ctx)
	defer janitor.Close() // deferred after st.Close, so it runs first
	jobs.RegisterDiskMetrics(reg, cfg.DataDir, cfg.Sandbox.MinFreeDisk, docker.DiskFree)
	// Long-lived requests (event streams, the desktop's and Jupyter's
	// WebSockets) end when shutdown begins, so they do not hold it up;
	// clients resume from Last-Event-ID, noVNC reconnects. No ReadTimeout or
	// WriteTimeout: they would cut streams and large downloads (the proxy
	// clears them for WebSockets anyway). The sandboxes' desktop and Jupyter
	// are reached through svc.Guest: no container port is ever published.
	baseCtx, endStreams := context.WithCancel(context.WithoutCancel(ctx))
	defer endStreams()
	srv := &http.Server{
		Handler:           api.New(api.Config{Tokens: tokens, NoAuth: cfg.Server.NoAuth, BaseURL: cfg.Server.PublicURL, ViewerKey: viewerKey, ViewURL: cfg.Server.ViewURL}, svc, reg, a.log),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
	}
	srv.RegisterOnShutdown(endStreams)
	a.log.Info("agentbox serving", "addr", "http://"+l.Addr().String(), "data_dir", cfg.DataDir,
		"concurrency", cfg.Server.Concurrency, "auth", !cfg.Server.NoAuth, "agent", cfg.Agent.Kind)
	if cfg.Agent.Kind == "model" && !cfg.Model.Configured() {
		a.log.Warn("no model configured: jobs will end in error until one is (set ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL; see docs/models.md)")
	}
	return runServer(ctx, srv, l, sched)
}

// runServer serves until ctx ends, lets the scheduler wind down (the API
// keeps answering meanwhile, so clients see jobs finish), then stops HTTP.
// If HTTP fails first, the scheduler is wound down the same way.
func runServer(ctx context.Context, srv *http.Server, l net.Listener, sched *jobs.Scheduler) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	httpErr := make(chan error, 1)
	go func() {
		err := srv.Serve(l)
		stop(fmt.Errorf("http: %w", err))
		httpErr <- err
	}()
	_ = sched.Run(ctx)
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

// lockDataDir makes sure one server at a time uses a data dir: the worker ID
// is derived from it, and two servers with one ID would take each other's jobs.
func lockDataDir(dir string) (func(), error) {
	return lockfile.Lock(dir, "serve.lock", "another agentbox serve (pid %s) is using the data dir %s; stop it or use another --data-dir")
}

// serverTokens decides the tokens the API accepts, generating one on first
// start when none is configured.
func (a *app) serverTokens() ([]string, error) {
	s := a.cfg.Server
	if s.NoAuth {
		if !isLoopback(s.Addr) {
			return nil, fmt.Errorf("--no-auth is refused on %s: only loopback addresses may run without a token", s.Addr)
		}
		a.log.Warn("auth is off: anyone who can reach " + s.Addr + " can run jobs")
		return nil, nil
	}
	var tokens []string
	if s.Token != "" {
		tokens = append(tokens, s.Token)
	}
	if s.TokenFile != "" {
		b, err := os.ReadFile(s.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("token file: %w", err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return nil, fmt.Errorf("token file %s is empty", s.TokenFile)
		}
		tokens = append(tokens, t)
	}
	if len(tokens) > 0 {
		return tokens, nil
	}
	tok, path, created, err := api.LoadOrCreateToken(a.cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if created {
		a.log.Info("generated an API token", "path", path)
	} else {
		a.log.Info("using the API token", "path", path)
	}
	return []string{tok}, nil
}

// viewerKey loads the key that signs viewer links and cookies: the
// configured file, which must exist, or <data dir>/viewer.key, generated on
// first start. A key kept on disk lets viewer cookies outlive a restart.
func (a *app) viewerKey() ([]byte, error) {
	path := a.cfg.Server.ViewerKeyFile
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("viewer key file: %w (make one with: head -c 32 /dev/urandom | base64 > %s; chmod 600 %s)", err, path, path)
		}
	} else {
		path = filepath.Join(a.cfg.DataDir, api.ViewerKeyFile)
	}
	key, created, err := api.LoadOrCreateSecret(path)
	if err != nil {
		return nil, fmt.Errorf("viewer key: %w", err)
	}
	if len(key) < 32 {
		return nil, fmt.Errorf("viewer key %s: %d characters, want at least 32 of random text (head -c 32 /dev/urandom | base64)", path, len(key))
	}
	if created {
		a.log.Info("generated the viewer signing key", "path", path)
	}
	return []byte(key), nil
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// workerID is stable across restarts of the server on one data dir, so a
// restarted server reclaims the jobs its previous life held at once.
func workerID(dataDir string) string {
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(dataDir))
	return host + "-" + hex.EncodeToString(sum[:4])
}
