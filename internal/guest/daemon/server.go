// Package daemon owns the guest daemon that runs inside every sandbox
// (`agentbox guest`): the server of the protocol package guest defines. It
// executes commands and file operations for the host, confines every path
// to the workspace, caps every output, and proxies the sandbox's web
// services (the desktop's noVNC, Jupyter) after starting them on demand,
// and relays the connections the sandbox's processes make to its egress
// listener (127.0.0.1:guest.EgressPort), the sandbox's only way out, to
// the host's proxy (egress.go).
// It listens on a unix socket, a vsock port or TCP (Listen); on TCP every
// request must carry the sandbox's secret. It is not a privilege boundary:
// it runs with the agent's uid, and the host treats all it returns as
// untrusted.
//
// The packages beneath own its parts: supervise the long-lived services,
// desktop the display and the actions on it, jupyter the notebook server
// and the Python kernel, output the caps on output, proc the process trees.
package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon/desktop"
	"github.com/agentbox/agentbox/internal/guest/daemon/jupyter"
	"github.com/agentbox/agentbox/internal/guest/daemon/supervise"
)

// Config configures the daemon.
type Config struct {
	// Workspace is the directory every file path is confined to.
	Workspace string
	// Version is reported by /health.
	Version string
	// Env is added to every command's environment.
	Env map[string]string
	// MaxWriteBytes caps one file write (default 1 GiB).
	MaxWriteBytes int64
	// MaxReadBytes caps one file read (default 256 MiB).
	MaxReadBytes int64
	// DrainGrace is how long a finished command's output pipes may stay open
	// (held by a background child) before the result is returned without
	// waiting for them (default 100ms).
	DrainGrace time.Duration
	// DisplayWidth and DisplayHeight are the desktop's screen size
	// (default 1024x768).
	DisplayWidth, DisplayHeight int
	// WebBase is the URL path under which the host serves this sandbox's
	// web services (for a job, "/v1/jobs/{id}"): Jupyter is started with
	// base URL WebBase+"/jupyter/", and noVNC is told to connect to
	// WebBase+"/desktop/websockify". Empty means "".
	WebBase string
	// Bound says the sandbox was bound to its job at create (--bound): its
	// environment and web base are final, and POST /bind, which any process
	// in the sandbox can reach, is refused.
	Bound bool
	// ServiceTimeout bounds how long a desktop or Jupyter service may
	// take to start answering before it is given up (default 20s). A VM
	// emulated without KVM runs them 10–30 times slower than a container.
	ServiceTimeout time.Duration
	// Secret, when set, must come with every request (in guest.SecretHeader);
	// others are answered 401. It is required on a network listener.
	Secret string
	// Egress is the listener on the sandbox's loopback through which its
	// processes reach the host's egress proxy (ListenEgress); nil means
	// none, and GET /egress is answered 503. Serve closes it.
	Egress net.Listener
	// EgressWait is how long a connection to Egress waits for an accept the
	// host posted before it is closed (default 10s).
	EgressWait time.Duration
	// EgressCABundle is where PUT /egress/ca writes the sandbox's trust
	// bundle (default guest.EgressCABundle); SystemCABundle is the image's
	// bundle it begins with (default /etc/ssl/certs/ca-certificates.crt).
	EgressCABundle, SystemCABundle string
	Log                            *slog.Logger
}

// Server is the guest daemon.
type Server struct {
	cfg  Config
	root *workspaceRoot
	log  *slog.Logger
	// drains owns the goroutines that keep reading the pipes of commands whose
	// background children outlived them.
	drains sync.WaitGroup
	mu     sync.Mutex
	pipes  map[*os.File]struct{}
	// sup runs the desktop's and Jupyter's services on demand.
	sup *supervise.Supervisor
	// desktop acts on the sandbox's display; kernel is the Python kernel
	// the python tool runs code in.
	desktop *desktop.Desktop
	kernel  *jupyter.Kernel
	// targets are the proxied web services; proxies counts the proxy
	// requests in flight (upgraded connections included) and tr carries them.
	targets  map[string]proxyTarget
	proxies  sync.WaitGroup
	tr       *http.Transport
	upgraded map[net.Conn]struct{} // proxied WebSockets and egress relays, guarded by mu
	// upgradedClosed says Serve has closed upgraded (guarded by mu).
	upgradedClosed bool
	// egress pairs local connections with the host's accepts; egressLoop
	// owns the goroutine accepting on cfg.Egress.
	egress     *egressQueue
	egressLoop sync.WaitGroup
	// bound says POST /bind was served (guarded by mu).
	bound bool
}

// New opens the workspace and returns a daemon ready to serve.
func New(cfg Config) (*Server, error) {
	if cfg.Workspace == "" {
		return nil, errors.New("guest: no workspace")
	}
	abs, err := filepath.Abs(cfg.Workspace)
	if err != nil {
		return nil, fmt.Errorf("guest: workspace: %w", err)
	}
	cfg.Workspace = abs
	root, err := openWorkspace(abs)
	if err != nil {
		return nil, fmt.Errorf("guest: open workspace: %w", err)
	}
	cfg.defaults()
	s := &Server{cfg: cfg, root: root, log: cfg.Log, pipes: map[*os.File]struct{}{},
		tr: newProxyTransport(), upgraded: map[net.Conn]struct{}{}, egress: &egressQueue{wait: cfg.EgressWait}}
	s.targets = s.defaultTargets()
	s.sup = s.newSupervisor()
	s.desktop, s.kernel = s.newDesktop(), s.newKernel()
	return s, nil
}

// newDesktop is the desktop over the supervisor's display programs.
func (s *Server) newDesktop() *desktop.Desktop {
	return desktop.New(desktop.Config{Width: s.cfg.DisplayWidth, Height: s.cfg.DisplayHeight,
		Services: s.sup, Environ: func() ([]string, error) { return s.env(nil) }, Log: s.log})
}

// newKernel is the client of the notebook server under the web base.
func (s *Server) newKernel() *jupyter.Kernel {
	return jupyter.New(jupyter.Config{WebBase: s.cfg.WebBase, Workspace: s.root, Services: s.sup, Log: s.log})
}

// defaults fills in what cfg leaves out.
func (cfg *Config) defaults() {
	if cfg.MaxWriteBytes <= 0 {
		cfg.MaxWriteBytes = 1 << 30
	}
	if cfg.MaxReadBytes <= 0 {
		cfg.MaxReadBytes = 256 << 20
	}
	if cfg.DrainGrace <= 0 {
		cfg.DrainGrace = 100 * time.Millisecond
	}
	if cfg.DisplayWidth <= 0 || cfg.DisplayHeight <= 0 {
		cfg.DisplayWidth, cfg.DisplayHeight = guest.DefaultDisplayWidth, guest.DefaultDisplayHeight
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.EgressWait <= 0 {
		cfg.EgressWait = defaultEgressWait
	}
	if cfg.EgressCABundle == "" {
		cfg.EgressCABundle = guest.EgressCABundle
	}
	if cfg.SystemCABundle == "" {
		cfg.SystemCABundle = defaultSystemCABundle
	}
}

// Handler returns the daemon's HTTP routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("POST /exec", s.exec)
	mux.HandleFunc("POST /exec/stream", s.execStream)
	mux.HandleFunc("POST /exec/attach", s.execAttach)
	mux.HandleFunc("GET /files/read", s.readFile)
	mux.HandleFunc("PUT /files/write", s.writeFile)
	mux.HandleFunc("GET /files/list", s.listFiles)
	mux.HandleFunc("GET /files/stat", s.statFile)
	mux.HandleFunc("DELETE /files", s.deleteFile)
	mux.HandleFunc("POST /files/move", s.moveFile)
	mux.HandleFunc("POST /files/search", s.searchFiles)
	mux.HandleFunc("GET /files/archive", s.archive)
	mux.HandleFunc("POST /desktop/start", s.desktopStart)
	mux.HandleFunc("POST /desktop/action", s.desktopAction)
	mux.HandleFunc("POST /kernel/execute", s.kernelExecute)
	mux.HandleFunc("/proxy/{service}/{path...}", s.proxy)
	mux.HandleFunc("GET /egress", s.egressAccept)
	mux.HandleFunc("PUT /egress/ca", s.egressCA)
	mux.HandleFunc("POST /bind", s.bind)
	if s.cfg.Secret != "" {
		return requireSecret(s.cfg.Secret, mux)
	}
	return mux
}

// Serve answers on l until ctx ends, then shuts down and waits for its
// goroutines.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	warmThreads(16)
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	s.startEgress()
	select {
	case err := <-errc:
		s.stopEgress()
		s.sup.Stop()
		return fmt.Errorf("guest: serve: %w", err)
	case <-ctx.Done():
	}
	// Starting services would only hold up the shutdown: abort them; the
	// host's egress accepts would too: end them.
	s.sup.BeginStop()
	s.stopEgress()
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutCtx)
	if err != nil {
		srv.Close() // requests still running: cut their connections
	}
	<-errc
	s.closeUpgraded()
	s.sup.Stop()
	s.proxies.Wait()
	s.tr.CloseIdleConnections()
	s.closePipes()
	s.drains.Wait()
	s.root.Close()
	return err
}

// warmThreads makes the Go runtime create n OS threads now and keep them idle.
// Under a fork bomb the pids limit is exhausted and clone fails; the runtime
// aborts if it cannot create a thread it needs, so the guest keeps enough.
func warmThreads(n int) {
	var ready, release sync.WaitGroup
	ready.Add(n)
	release.Add(1)
	for range n {
		go func() {
			runtime.LockOSThread()
			ready.Done()
			release.Wait()
			runtime.UnlockOSThread() // the thread returns to the idle pool
		}()
	}
	ready.Wait()
	release.Done()
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, guest.Health{
		Status: "ok", Protocol: guest.ProtocolVersion, Version: s.cfg.Version,
		Workspace: s.cfg.Workspace, UID: os.Getuid(), PID: os.Getpid(),
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

var codeStatus = map[string]int{
	guest.CodeBadRequest: http.StatusBadRequest,
	guest.CodeNotFound:   http.StatusNotFound,
	guest.CodePathEscape: http.StatusForbidden,
	guest.CodeExists:     http.StatusConflict,
	guest.CodeIsDir:      http.StatusConflict,
	guest.CodeNotDir:     http.StatusConflict,
	guest.CodeTooLarge:   http.StatusRequestEntityTooLarge,
	guest.CodeService:    http.StatusServiceUnavailable,
}

// writeError answers with err as a JSON error, classifying OS errors.
func (s *Server) writeError(w http.ResponseWriter, err error) {
	e := s.classify(err)
	status, ok := codeStatus[e.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	writeJSON(w, status, guest.ErrorBody{Error: e})
}

// decode reads a JSON body of at most 64 MiB into v.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return guest.Errorf(guest.CodeBadRequest, "bad request body: %v", err)
	}
	return nil
}

// track records the read ends of output pipes still being drained.
func (s *Server) track(f *os.File, open bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if open {
		s.pipes[f] = struct{}{}
	} else {
		delete(s.pipes, f)
	}
}

// closePipes ends every drain so Serve can wait for their goroutines.
func (s *Server) closePipes() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for f := range s.pipes {
		f.Close()
	}
}
