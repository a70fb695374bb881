package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon/output"
	"github.com/agentbox/agentbox/internal/guest/daemon/proc"
)

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var req guest.ExecRequest
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	limit := req.OutputLimit()
	stdout, stderr := output.NewCapture(limit), output.NewCapture(limit)
	res, err := s.run(r.Context(), req, stdout, stderr)
	if err != nil {
		s.writeError(w, err)
		return
	}
	var cut1, cut2 bool
	res.Stdout, res.StdoutBytes, cut1 = stdout.Result()
	res.Stderr, res.StderrBytes, cut2 = stderr.Result()
	res.Truncated = cut1 || cut2
	writeJSON(w, http.StatusOK, res)
}

func (s *Server) execStream(w http.ResponseWriter, r *http.Request) {
	var req guest.ExecRequest
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if _, err := s.prepare(req); err != nil {
		s.writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	send := func(ev guest.StreamEvent) {
		mu.Lock()
		defer mu.Unlock()
		_ = enc.Encode(ev)
		_ = rc.Flush()
	}
	limit := req.OutputLimit()
	stdout := output.NewStream(limit, func(p []byte) { send(guest.StreamEvent{Type: "stdout", Data: p}) })
	stderr := output.NewStream(limit, func(p []byte) { send(guest.StreamEvent{Type: "stderr", Data: p}) })
	var outW, errW io.Writer = stdout, stderr
	// capture=1 also keeps each stream's head and tail as /exec does, for
	// the exit event: the live chunks stop at the cap, the result does not.
	var capOut, capErr *output.Capture
	if r.URL.Query().Get("capture") == "1" {
		capOut, capErr = output.NewCapture(limit), output.NewCapture(limit)
		outW, errW = io.MultiWriter(stdout, capOut), io.MultiWriter(stderr, capErr)
	}
	res, err := s.run(r.Context(), req, outW, errW)
	if err != nil { // prepare already passed, so this is rare; report it in-band
		send(guest.StreamEvent{Type: "error", Result: &guest.ExecResult{StartError: err.Error(), ExitCode: 126}})
		return
	}
	var cut1, cut2 bool
	res.StdoutBytes, cut1 = stdout.Count()
	res.StderrBytes, cut2 = stderr.Count()
	if capOut != nil {
		res.Stdout, _, _ = capOut.Result()
		res.Stderr, _, _ = capErr.Result()
	}
	res.Truncated = cut1 || cut2
	send(guest.StreamEvent{Type: "exit", Result: &res})
}

// prepared is a validated exec request.
type prepared struct {
	cmd     *exec.Cmd
	timeout time.Duration
}

// prepare validates req and builds the command without starting it.
func (s *Server) prepare(req guest.ExecRequest) (prepared, error) {
	if len(req.Cmd) == 0 || req.Cmd[0] == "" {
		return prepared{}, guest.Errorf(guest.CodeBadRequest, "exec: cmd is empty")
	}
	if req.TimeoutMS < 0 || req.MaxOutput < 0 {
		return prepared{}, guest.Errorf(guest.CodeBadRequest, "exec: timeout_ms and max_output must not be negative")
	}
	dir, err := s.cwd(req.Cwd)
	if err != nil {
		return prepared{}, err
	}
	env, err := s.env(req.Env)
	if err != nil {
		return prepared{}, err
	}
	cmd := exec.Command(req.Cmd[0], req.Cmd[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if req.Stdin != nil {
		cmd.Stdin = bytes.NewReader(req.Stdin)
	}
	// Bounds how long Wait waits for stdin to be consumed by a command that
	// exited while a background child kept stdin open.
	cmd.WaitDelay = s.cfg.DrainGrace
	timeout := guest.DefaultExecTimeout
	if req.TimeoutMS > 0 {
		timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	}
	return prepared{cmd: cmd, timeout: timeout}, nil
}

func (s *Server) cwd(p string) (string, error) {
	if p == "" {
		return s.cfg.Workspace, nil
	}
	dir := p
	if !filepath.IsAbs(p) {
		dir = filepath.Join(s.cfg.Workspace, p)
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return "", guest.Errorf(guest.CodeBadRequest, "exec: cwd %q is not a directory", p)
	}
	return dir, nil
}

func (s *Server) env(extra map[string]string) ([]string, error) {
	// Graphical programs show on the sandbox's desktop unless told otherwise.
	env := append(os.Environ(), "DISPLAY="+guest.Display)
	for _, m := range []map[string]string{s.cfg.Env, extra} {
		for k, v := range m {
			if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
				return nil, guest.Errorf(guest.CodeBadRequest, "exec: bad environment variable %q", k)
			}
			env = append(env, k+"="+v)
		}
	}
	return env, nil
}

// run executes req, writing its output to stdout and stderr until it returns.
// The command's process group (and any descendant that left it) is killed on
// timeout or when ctx ends. A command that leaves background children holding
// its output open is waited for only DrainGrace; the children keep running
// and their output is read and discarded, so they neither block nor die of
// SIGPIPE.
func (s *Server) run(ctx context.Context, req guest.ExecRequest, stdout, stderr io.Writer) (guest.ExecResult, error) {
	p, err := s.prepare(req)
	if err != nil {
		return guest.ExecResult{}, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return guest.ExecResult{}, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return guest.ExecResult{}, err
	}
	p.cmd.Stdout, p.cmd.Stderr = outW, errW
	oomBefore := proc.OOMKills()
	start := time.Now()
	err = p.cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return startFailure(req, err), nil
	}
	proc.RaiseOOMScore(p.cmd.Process.Pid)
	og, eg := &gate{w: stdout}, &gate{w: stderr}
	outDone, errDone := s.pump(outR, og), s.pump(errR, eg)
	res := s.wait(ctx, p)
	res.DurationMS = time.Since(start).Milliseconds()
	s.settle(outDone, errDone)
	og.close()
	eg.close()
	if n := proc.OOMKills(); n >= 0 && n > oomBefore {
		res.OOMKilled = true
	}
	return res, nil
}

// wait waits for the command to exit, killing its tree on timeout or cancel.
func (s *Server) wait(ctx context.Context, p prepared) guest.ExecResult {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	waited := make(chan struct{})
	go func() {
		_ = p.cmd.Wait()
		close(waited)
	}()
	var res guest.ExecResult
	select {
	case <-waited:
	case <-ctx.Done():
		res.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
		res.Canceled = !res.TimedOut
		proc.KillTree(p.cmd.Process.Pid)
		<-waited
	}
	ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		res.ExitCode = 128 + int(ws.Signal())
		res.Signal = unix.SignalName(ws.Signal())
	default:
		res.ExitCode = ws.ExitStatus()
	}
	return res
}

// settle gives the output pipes a short grace to reach end of file.
func (s *Server) settle(done ...<-chan struct{}) {
	t := time.NewTimer(s.cfg.DrainGrace)
	defer t.Stop()
	for _, d := range done {
		select {
		case <-d:
		case <-t.C:
			return
		}
	}
}

// pump copies r into w until end of file; its goroutine is owned by the
// server, which closes r on shutdown.
func (s *Server) pump(r *os.File, w io.Writer) <-chan struct{} {
	done := make(chan struct{})
	s.drains.Add(1)
	s.track(r, true)
	go func() {
		defer s.drains.Done()
		// 64 KiB at a time, a whole pipe's worth (io.Copy would take 32):
		// under gVisor every read is a trapped syscall.
		_, _ = io.CopyBuffer(w, struct{ io.Reader }{r}, make([]byte, 64<<10))
		s.track(r, false)
		r.Close()
		close(done)
	}()
	return done
}

func startFailure(req guest.ExecRequest, err error) guest.ExecResult {
	code := 126
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		code = 127
	}
	msg := "agentbox: cannot run " + req.Cmd[0] + ": " + err.Error()
	return guest.ExecResult{ExitCode: code, StartError: msg, Stderr: []byte(msg + "\n"), StderrBytes: int64(len(msg) + 1)}
}

// gate passes writes through until closed, then discards them.
type gate struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (g *gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		_, _ = g.w.Write(p)
	}
	return len(p), nil
}

func (g *gate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}
