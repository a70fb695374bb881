package fake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// Sandbox is one fake sandbox: its guest process and its directory. It is
// a sandbox.Binder, a sandbox.Exiter and a sandbox.Pauser.
type Sandbox struct {
	d       *Driver
	display sandbox.Display
	mu      sync.Mutex // guards the fields below
	h       sandbox.Handle
	st      state
	env     map[string]string
	webBase string
	bound   bool
	client  *guest.Client
}

// Handle implements sandbox.Sandbox.
func (s *Sandbox) Handle() sandbox.Handle {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.h
}

// Guest implements sandbox.Sandbox.
func (s *Sandbox) Guest() *guest.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client
}

// bind records the job's data; the guest started next serves it.
func (s *Sandbox) bind(b sandbox.Binding) {
	s.h.JobID = b.JobID
	if b.WorkspaceDir != "" {
		s.st.Workspace, s.st.Scratch = b.WorkspaceDir, false
	}
	s.env, s.webBase, s.bound = b.Env, b.WebBase, true
}

// Bind implements sandbox.Binder. The guest is restarted on the job's
// workspace: an unbound sandbox has run nothing of a job's to lose.
func (s *Sandbox) Bind(ctx context.Context, b sandbox.Binding) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bound {
		return fmt.Errorf("%w: fake sandbox %s is bound already", sandbox.ErrInvalidSpec, s.h.ID)
	}
	if err := killAll(s.st.Dir); err != nil {
		return err
	}
	s.bind(b)
	return s.startLocked(ctx)
}

// start runs the guest and waits until it answers.
func (s *Sandbox) start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startLocked(ctx)
}

func (s *Sandbox) startLocked(ctx context.Context) error {
	cfg := guestConfig{Workspace: s.st.Workspace, Socket: filepath.Join(s.st.Dir, guest.SocketName),
		Env: s.env, WebBase: s.webBase, Bound: s.bound, Width: s.display.Width, Height: s.display.Height}
	pid, err := launch(s.st.Dir, cfg)
	if err != nil {
		return fmt.Errorf("fake sandbox: start guest: %w", err)
	}
	s.st.PID, s.st.Start = pid, procStart(pid)
	if s.st.Start == "" {
		return fmt.Errorf("fake sandbox: guest exited at once (see %s)", filepath.Join(s.st.Dir, logFile))
	}
	if s.h.State, err = json.Marshal(s.st); err != nil {
		return err
	}
	s.client = guest.NewClientAt(s.st.Dir, guest.SocketName)
	if err := s.await(ctx); err != nil {
		killAll(s.st.Dir)
		return err
	}
	b, err := json.Marshal(s.h)
	if err == nil {
		err = os.WriteFile(filepath.Join(s.st.Dir, handleFile), b, 0o600)
	}
	return err
}

// await waits until the guest answers, or fails when it exits first.
func (s *Sandbox) await(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if _, err := s.client.Health(ctx); err == nil {
			return nil
		}
		if !s.running() {
			return fmt.Errorf("fake sandbox: guest exited (see %s)", filepath.Join(s.st.Dir, logFile))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("fake sandbox: guest never answered: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// running says whether the guest process still runs.
func (s *Sandbox) running() bool {
	return s.st.PID > 0 && s.st.Start != "" && procStart(s.st.PID) == s.st.Start
}

// Exited implements sandbox.Exiter: the guest process ended on its own.
func (s *Sandbox) Exited(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running() {
		return nil
	}
	return fmt.Errorf("%w: fake sandbox %s: guest process %d exited", sandbox.ErrGone, s.h.ID, s.st.PID)
}

// Pause implements sandbox.Pauser: SIGSTOP to every process of the sandbox.
func (s *Sandbox) Pause(context.Context) error { return freeze(s.st.Dir) }

// Unpause implements sandbox.Pauser: SIGCONT to every process of the sandbox.
func (s *Sandbox) Unpause(context.Context) error { return signalAll(s.st.Dir, sigCont) }

// Destroy implements sandbox.Sandbox: it kills every process of the
// sandbox and removes its directory (a caller's workspace stays).
func (s *Sandbox) Destroy(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		s.client.Close()
	}
	if err := killAll(s.st.Dir); err != nil {
		return err
	}
	if err := os.RemoveAll(s.st.Dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		makeWritable(s.st.Dir)
		return os.RemoveAll(s.st.Dir)
	}
	return nil
}

// makeWritable gives its owner write access to every directory under dir
// (a command may have made one read-only), so that it can be removed.
func makeWritable(dir string) {
	filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
}
