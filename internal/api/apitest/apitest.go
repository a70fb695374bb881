// Package apitest starts the real API over the real jobs.Service and a real
// SQLite store in a temporary directory, for the tests of the API, the Go
// client and the CLI. There is no scheduler: tests move jobs through their
// states themselves (Start, Finish) and write events (Emit).
package apitest

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/githost"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/workspace"
)

// Token is the bearer token the test server accepts.
const Token = "test-token-0123456789"

// Env is a running test server and what it runs on.
type Env struct {
	t       testing.TB
	Server  *httptest.Server
	URL     string
	Store   store.Store
	Svc     *jobs.Service
	DataDir string
	// Workspaces keeps the jobs' workspaces, under DataDir.
	Workspaces *workspace.Local
	// Media keeps the images of the jobs' tool results, under DataDir.
	Media *jobs.Media
	Reg   *prometheus.Registry
	hook  atomic.Pointer[func(*http.Request)]
	// api, svc and log are what the handler is made of (Configure).
	api     api.Config
	svc     jobs.ServiceConfig
	log     *slog.Logger
	handler atomic.Pointer[http.Handler]
}

// OnRequest makes fn see every request before the API handles it, e.g. to
// move a job along once a client starts following it.
func (e *Env) OnRequest(fn func(*http.Request)) { e.hook.Store(&fn) }

// New starts a server. cfg.Tokens defaults to Token; Poll and KeepAlive
// default to a few milliseconds so that streams react fast.
func New(t testing.TB, cfg api.Config) *Env {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "agentbox.db"), sqlite.Options{Synchronous: sqlite.SyncNormal})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	if cfg.Tokens == nil && !cfg.NoAuth {
		cfg.Tokens = []string{Token}
	}
	if cfg.Poll == 0 {
		cfg.Poll = 10 * time.Millisecond
	}
	e := &Env{t: t, Store: st, DataDir: dir, Workspaces: workspace.NewLocal(dir), Media: jobs.NewMedia(dir), api: cfg,
		log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	// MaxUpload: the API's limit on the archive, and the service's on its files.
	e.svc = jobs.ServiceConfig{Store: st, Workspaces: e.Workspaces, Feed: jobs.NewFeed(st, e.log), MaxUpload: cfg.MaxUploadBytes, Media: e.Media}
	e.Configure(func(*jobs.ServiceConfig) {})
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fn := e.hook.Load(); fn != nil {
			(*fn)(r)
		}
		(*e.handler.Load()).ServeHTTP(w, r)
	}))
	e.URL = e.Server.URL
	t.Cleanup(func() {
		e.Server.Close()
		st.Close()
	})
	return e
}

// Configure changes the service's configuration with fn (the changes of
// earlier calls stay) and serves a new API over a new service made of it,
// which Svc then is, with a fresh Reg; the jobs, their events and the
// service's live feed stay.
func (e *Env) Configure(fn func(*jobs.ServiceConfig)) {
	e.t.Helper()
	fn(&e.svc)
	svc, err := jobs.NewService(e.svc)
	if err != nil {
		e.t.Fatal(err)
	}
	e.Svc, e.Reg = svc, prometheus.NewRegistry()
	h := api.New(e.api, e.Svc, e.Reg, e.log)
	e.handler.Store(&h)
}

// Submit creates a pending job with the given task.
func (e *Env) Submit(task string) store.Job {
	e.t.Helper()
	j, _, err := e.Svc.Submit(context.Background(), jobs.SubmitRequest{Task: task})
	if err != nil {
		e.t.Fatalf("submit: %v", err)
	}
	return j
}

// Start marks a job running, as a worker's claim would, and records it.
func (e *Env) Start(id string) {
	e.t.Helper()
	e.update(id, func(j *store.Job) {
		j.Status, j.Attempts, j.StartedAt = store.StatusRunning, j.Attempts+1, time.Now().UTC()
	})
	e.Emit(id, event.State{Status: store.StatusRunning, Attempt: 1})
}

// Finish ends a job with status (and errMsg for error or canceled) and
// records the final state event.
func (e *Env) Finish(id string, status store.Status, errMsg string) {
	e.t.Helper()
	e.update(id, func(j *store.Job) {
		j.Status, j.Error, j.EndedAt = status, errMsg, time.Now().UTC()
		if status == store.StatusComplete {
			j.Result = "done"
		}
	})
	e.Emit(id, event.State{Status: status, Error: errMsg})
}

// SetStatus changes a job's status without recording an event.
func (e *Env) SetStatus(id string, status store.Status) {
	e.t.Helper()
	e.update(id, func(j *store.Job) { j.Status = status })
}

func (e *Env) update(id string, fn func(*store.Job)) {
	e.t.Helper()
	_, err := e.Store.UpdateJob(context.Background(), id, func(j *store.Job) error {
		fn(j)
		j.UpdatedAt = time.Now().UTC()
		return nil
	})
	if err != nil {
		e.t.Fatalf("update job %s: %v", id, err)
	}
}

// Emit appends an event to a job's log.
func (e *Env) Emit(id string, p event.Payload) store.Event {
	e.t.Helper()
	typ, b, err := event.Marshal(p)
	if err != nil {
		e.t.Fatal(err)
	}
	ev, err := e.Store.AppendEvent(context.Background(), id, typ, b)
	if err != nil {
		e.t.Fatalf("append event: %v", err)
	}
	return ev
}

// Workspace creates the job's workspace directory and returns its path.
func (e *Env) Workspace(id string) string {
	e.t.Helper()
	dir, err := e.Workspaces.Prepare(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return dir
}

// WriteFile writes a file (and its parents) into the job's workspace.
func (e *Env) WriteFile(id, rel, content string) {
	e.t.Helper()
	p := filepath.Join(e.Workspace(id), filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// testWriter sends the server's log to the test's log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// Repos gives the service the host's git (local repositories allowed,
// none in DataDir), as a server has it, and returns it: the diff routes
// and artifacts.zip's agentbox.diff work from then on.
func (e *Env) Repos() *jobs.Repos {
	e.t.Helper()
	h, err := githost.New(githost.Config{AllowLocal: true, Forbidden: []string{e.DataDir}})
	if err != nil {
		e.t.Fatal(err)
	}
	r := &jobs.Repos{Host: h, Dir: filepath.Join(e.DataDir, "git")}
	e.Configure(func(c *jobs.ServiceConfig) { c.Repos = r })
	return r
}

// SetGit records what the host did with a job's repository (its base
// commit, its branch), as a worker's first run would.
func (e *Env) SetGit(id string, g store.Git) {
	e.t.Helper()
	e.update(id, func(j *store.Job) { j.Git = g })
}
