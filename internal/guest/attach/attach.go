// Package attach joins a local process's streams and terminal to a
// command in a sandbox (agentbox exec): raw mode on the local terminal
// for the command's run, its window size followed, each output stream
// capped. The protocol itself is guest.ExecAttach's.
package attach

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/docker/go-units"
	"golang.org/x/term"

	"github.com/agentbox/agentbox/internal/guest"
)

// TerminalMaxOutput is the output cap when stdout is a terminal (without
// -t) and none was given: a screen has no use for more, a file or a pipe may.
const TerminalMaxOutput = 10 << 20

// Attacher runs a command in a sandbox attached to streams
// (wiring.Scratch, over guest.Client.ExecAttach).
type Attacher interface {
	Attach(ctx context.Context, req guest.AttachRequest, aio guest.AttachIO) (guest.ExecResult, error)
}

// Streams are what a command is attached to.
type Streams struct {
	// Stdin is forwarded to the command; nil keeps it out.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// TTY runs the command on a pseudo-terminal.
	TTY bool
	// Local is the terminal put in raw mode while the command runs (-t on
	// a terminal), nil otherwise.
	Local *os.File
	// TermEnv is TERM for the command's terminal, "" to leave it as the
	// request's environment sets it.
	TermEnv string
	// Window is the local terminal whose size the command's terminal
	// takes and follows (TTY): stdout's, else stdin's; nil for none.
	Window *os.File
	// MaxOutput caps each of Stdout and Stderr; 0 means no cap.
	MaxOutput int64
}

// Run runs req through a attached to st and returns its result; the
// local terminal, if it was made raw, is restored before it returns.
// Past MaxOutput the command is stopped and the error is an
// *OutputCutError.
func Run(ctx context.Context, a Attacher, req guest.ExecRequest, st Streams) (guest.ExecResult, error) {
	areq := guest.AttachRequest{ExecRequest: req, Interactive: st.Stdin != nil, TTY: st.TTY}
	aio := guest.AttachIO{Stdin: st.Stdin, Stdout: &capWriter{w: st.Stdout, max: st.MaxOutput}, Stderr: &capWriter{w: st.Stderr, max: st.MaxOutput}}
	if st.TTY {
		if st.TermEnv != "" {
			areq.Env = map[string]string{"TERM": st.TermEnv}
		}
		areq.Size, _ = windowSize(st.Window)
	}
	if st.Local != nil {
		restore, err := makeRaw(st.Local)
		if err != nil {
			return guest.ExecResult{}, err
		}
		defer restore()
		sizes, stop := followWindow(st.Window)
		defer stop()
		aio.Resize = sizes
	}
	return a.Attach(ctx, areq, aio)
}

// ParseMaxOutput is --max-output in bytes; "" is the default, a cap only
// on a terminal.
func ParseMaxOutput(s string, onTerminal bool) (int64, error) {
	if s == "" {
		if onTerminal {
			return TerminalMaxOutput, nil
		}
		return 0, nil
	}
	n, err := units.RAMInBytes(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("--max-output %q: want a size such as 10m or 1g, or 0 for no cap", s)
	}
	return n, nil
}

// windowSize is the size of the terminal f, if it is one.
func windowSize(f *os.File) (guest.WindowSize, bool) {
	if f == nil {
		return guest.WindowSize{}, false
	}
	cols, rows, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return guest.WindowSize{}, false
	}
	return guest.WindowSize{Rows: uint16(rows), Cols: uint16(cols)}, true
}

// followWindow sends the size of the terminal f on each SIGWINCH until stop.
func followWindow(f *os.File) (<-chan guest.WindowSize, func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGWINCH)
	sizes, done := make(chan guest.WindowSize), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-sig:
			}
			ws, ok := windowSize(f)
			if !ok {
				continue
			}
			select {
			case sizes <- ws:
			case <-done:
				return
			}
		}
	}()
	return sizes, func() {
		signal.Stop(sig)
		close(done)
		wg.Wait()
	}
}

// makeRaw puts the terminal f in raw mode and returns what restores it.
func makeRaw(f *os.File) (func(), error) {
	old, err := term.MakeRaw(int(f.Fd()))
	if err != nil {
		return nil, fmt.Errorf("exec -t: raw mode: %w", err)
	}
	return func() { _ = term.Restore(int(f.Fd()), old) }, nil
}

// TerminalFile is v as a file if it is a terminal, else nil.
func TerminalFile(v any) *os.File {
	f, ok := v.(*os.File)
	if !ok || f == nil || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return f
}

// HasEnv reports whether env (KEY=VALUE entries) sets key.
func HasEnv(env []string, key string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return true
		}
	}
	return false
}

// capWriter passes the first max bytes of a stream (all when max is 0)
// and fails with an *OutputCutError past them, which stops the command.
type capWriter struct {
	w      io.Writer
	max, n int64
}

func (c *capWriter) Write(p []byte) (int, error) {
	if c.max <= 0 || int64(len(p)) <= c.max-c.n {
		c.n += int64(len(p))
		return c.w.Write(p)
	}
	room := c.max - c.n
	c.n = c.max
	if _, err := c.w.Write(p[:room]); err != nil {
		return 0, err
	}
	return int(room), &OutputCutError{Max: c.max}
}

// OutputCutError says the output passed --max-output.
type OutputCutError struct{ Max int64 }

func (e *OutputCutError) Error() string {
	return fmt.Sprintf("output cut at %s (--max-output); rerun with --max-output 0 for all of it", sizeName(e.Max))
}

// sizeName is n in the largest binary unit that divides it: "10 MiB".
func sizeName(n int64) string {
	for _, u := range []struct {
		name  string
		bytes int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.bytes && n%u.bytes == 0 {
			return fmt.Sprintf("%d %s", n/u.bytes, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
