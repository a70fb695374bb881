package supervise

// One run of a supervised service: starting it, watching it exit, keeping
// its log, and stopping everything when the guest shuts down.

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon/proc"
)

// start launches one run of svc in a process group of its own, with its
// output going to the service's log file.
func (s *Supervisor) start(svc *service) (*process, error) {
	name := svc.spec.Name
	if svc.spec.Setup != nil {
		if err := svc.spec.Setup(); err != nil {
			return nil, guest.Errorf(guest.CodeService, "%s: prepare: %v", name, err)
		}
	}
	env, err := s.cfg.Environ()
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(s.logPath(name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		return nil, guest.Errorf(guest.CodeService, "%s: log file: %v", name, err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, guest.Errorf(guest.CodeService, "%s: %v", name, err)
	}
	cmd := exec.Command(svc.spec.Argv[0], svc.spec.Argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, s.cfg.Dir, w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &process{cmd: cmd, reaped: make(chan struct{}), copied: make(chan struct{})}
	if err := s.launch(svc, p, r); err != nil {
		w.Close()
		r.Close()
		logf.Close()
		return nil, err
	}
	w.Close()
	go s.copyLog(p, r, logf)
	go s.watch(svc, p)
	return p, nil
}

// launch starts p's command and records it, unless the supervisor is
// stopping; the lock makes stop see every process that ever started.
func (s *Supervisor) launch(svc *service, p *process, out *os.File) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return guest.Errorf(guest.CodeService, "%s: %v", svc.spec.Name, errStopping)
	}
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		return guest.Errorf(guest.CodeService, "start %s: %v (is the sandbox image current? rebuild it with: agentbox image build)", svc.spec.Name, err)
	}
	proc.RaiseOOMScore(p.cmd.Process.Pid)
	svc.proc = p
	s.pipes[out] = struct{}{}
	s.wg.Add(2)
	s.cfg.Log.Info("service started", "service", svc.spec.Name, "pid", p.cmd.Process.Pid)
	return nil
}

// watch waits for p to exit, records the exit and restarts the service
// after a backoff unless it crash-looped, was abandoned, or the supervisor
// is stopping.
func (s *Supervisor) watch(svc *service, p *process) {
	defer s.wg.Done()
	err := p.cmd.Wait()
	// What the service left in its group goes with it.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.copied:
	case <-time.After(500 * time.Millisecond): // a child that left the group holds the pipe
	}
	delay, restart := s.reap(svc, p, err)
	if !restart || Sleep(s.ctx, delay) != nil {
		return
	}
	if err := s.Ensure(s.ctx, svc.spec.Name); err != nil && s.ctx.Err() == nil {
		s.cfg.Log.Warn("service restart failed", "service", svc.spec.Name, "err", err)
	}
}

// reap records p's exit and says whether, and after how long, to restart.
func (s *Supervisor) reap(svc *service, p *process, waitErr error) (time.Duration, bool) {
	tail := s.logTail(svc.spec.Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	defer close(p.reaped)
	if svc.proc == p {
		svc.proc = nil
	}
	if s.stopping || p.abandoned {
		return 0, false
	}
	now := time.Now()
	svc.exits = append(recent(svc.exits, now.Add(-s.cfg.CrashWindow)), now)
	s.cfg.Log.Warn("service exited", "service", svc.spec.Name, "err", exitText(waitErr), "uptime", now.Sub(p.started).Round(time.Millisecond))
	if n := len(svc.exits); n >= s.cfg.CrashLimit {
		svc.failed = guest.Errorf(guest.CodeService, "%s keeps crashing (%d exits within %v; last: %s), so it is not restarted for now%s",
			svc.spec.Name, n, s.cfg.CrashWindow, exitText(waitErr), tail)
		s.cfg.Log.Error("service crash loop", "service", svc.spec.Name, "exits", n)
		return 0, false
	}
	return s.backoff(len(svc.exits)), true
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// abandon kills a process that did not become ready; it is not restarted.
func (s *Supervisor) abandon(p *process) {
	s.mu.Lock()
	p.abandoned = true
	s.mu.Unlock()
	proc.KillTree(p.cmd.Process.Pid)
	<-p.reaped
}

// Stop ends every service (SIGTERM to its group, SIGKILL after StopGrace)
// and waits for the supervisor's goroutines. Ensure fails from then on.
func (s *Supervisor) Stop() {
	procs := s.beginStop()
	escaped := map[*process][]int{}
	for _, p := range procs {
		escaped[p] = proc.Descendants(p.cmd.Process.Pid)
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	}
	grace, cancel := context.WithTimeout(context.Background(), s.cfg.StopGrace)
	defer cancel()
	for _, p := range procs {
		select {
		case <-p.reaped:
		case <-grace.Done():
		}
	}
	for _, p := range procs {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		for _, pid := range escaped[p] {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for _, p := range procs {
		<-p.reaped
	}
	s.closePipes()
	s.wg.Wait()
}

// BeginStop makes Ensure fail and aborts pending starts and restarts, so
// that they do not hold up a shutdown; Stop then ends the services.
func (s *Supervisor) BeginStop() { s.beginStop() }

// beginStop is BeginStop; it returns the running processes.
func (s *Supervisor) beginStop() []*process {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	s.cancel(errStopping)
	var procs []*process
	for _, svc := range s.svcs {
		if svc.proc != nil {
			procs = append(procs, svc.proc)
		}
	}
	return procs
}

// closePipes ends log copiers still held open by a service's stray children.
func (s *Supervisor) closePipes() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for f := range s.pipes {
		f.Close()
	}
}

// copyLog copies a run's output into its log file, emptying the file
// whenever it would pass LogCap so the end, where the errors are, is kept.
func (s *Supervisor) copyLog(p *process, r, logf *os.File) {
	defer s.wg.Done()
	defer close(p.copied)
	defer logf.Close()
	defer func() {
		s.mu.Lock()
		delete(s.pipes, r)
		s.mu.Unlock()
		r.Close()
	}()
	var size int64
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		chunk := buf[:n]
		if size+int64(n) > s.cfg.LogCap {
			_ = logf.Truncate(0)
			_, _ = fmt.Fprintf(logf, "[agentbox: log emptied at %d bytes]\n", s.cfg.LogCap)
			chunk = chunk[max(0, int64(n)-s.cfg.LogCap):]
			size = 0
		}
		if len(chunk) > 0 {
			_, _ = logf.Write(chunk)
			size += int64(len(chunk))
		}
		if err != nil {
			return
		}
	}
}

func (s *Supervisor) logPath(name string) string {
	return filepath.Join(s.cfg.LogDir, "agentbox-"+name+".log")
}

// logTail returns the end of a service's log, introduced for an error
// message, or "" if it is empty.
func (s *Supervisor) logTail(name string) string {
	const tailMax = 2 << 10
	f, err := os.Open(s.logPath(name))
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > tailMax {
		_, _ = f.Seek(-tailMax, io.SeekEnd)
	}
	b, _ := io.ReadAll(io.LimitReader(f, tailMax))
	text := strings.TrimSpace(strings.ToValidUTF8(string(b), "?"))
	if text == "" {
		return ""
	}
	return fmt.Sprintf("; the end of its log (%s):\n%s", s.logPath(name), text)
}
