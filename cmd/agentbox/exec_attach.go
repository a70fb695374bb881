package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/wiring"
)

// exitOutputCut is exec's exit status when --max-output cut the output.
const exitOutputCut = 3

// terminalMaxOutput is --max-output's default when stdout is a terminal
// (without -t): a screen has no use for more, a file or a pipe may.
const terminalMaxOutput = 10 << 20

// execStreams are what an exec'd command is attached to.
type execStreams struct {
	// stdin is forwarded to the command; nil keeps it out.
	stdin          io.Reader
	stdout, stderr io.Writer
	// tty runs the command on a pseudo-terminal; raw passes its bytes unchanged.
	tty, raw bool
	// local is the terminal put in raw mode while the command runs (-t on
	// a terminal), nil otherwise.
	local *os.File
	// termEnv is TERM for the command's terminal, "" to leave it as -e set it.
	termEnv string
	// maxOutput caps each of stdout and stderr; 0 means no cap.
	maxOutput int64
}

// newExecStreams reads -i, -t and --max-output against the streams cmd has.
func newExecStreams(cmd *cobra.Command, f execFlags) (*execStreams, error) {
	st := &execStreams{stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(), tty: f.tty, raw: f.raw || f.tty}
	in := cmd.InOrStdin()
	inTerminal := terminalFile(in) != nil
	forward := !inTerminal || f.tty
	if cmd.Flags().Changed("interactive") {
		forward = f.interactive
	}
	if forward {
		st.stdin = in
	}
	if f.tty && forward && inTerminal {
		st.local = terminalFile(in)
	}
	if f.tty && !hasEnv(f.Env, "TERM") {
		st.termEnv = cmp.Or(os.Getenv("TERM"), "xterm-256color")
	}
	max, err := parseMaxOutput(f.maxOutput, terminalFile(st.stdout) != nil && !f.tty)
	st.maxOutput = max
	return st, err
}

// parseMaxOutput is --max-output in bytes; "" is the default, a cap only
// on a terminal.
func parseMaxOutput(s string, onTerminal bool) (int64, error) {
	if s == "" {
		if onTerminal {
			return terminalMaxOutput, nil
		}
		return 0, nil
	}
	n, err := units.RAMInBytes(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("--max-output %q: want a size such as 10m or 1g, or 0 for no cap", s)
	}
	return n, nil
}

// run runs req in s attached to the streams and returns its result; the
// local terminal, if it was made raw, is restored before it returns.
func (st *execStreams) run(ctx context.Context, s *wiring.Scratch, req guest.ExecRequest) (guest.ExecResult, error) {
	areq := guest.AttachRequest{ExecRequest: req, Interactive: st.stdin != nil, TTY: st.tty}
	out, errOut := render.ForTerminal(st.stdout, st.raw), render.ForTerminal(st.stderr, st.raw)
	aio := guest.AttachIO{Stdin: st.stdin, Stdout: &capWriter{w: out, max: st.maxOutput}, Stderr: &capWriter{w: errOut, max: st.maxOutput}}
	if st.tty {
		if st.termEnv != "" {
			areq.Env = map[string]string{"TERM": st.termEnv}
		}
		areq.Size, _ = st.windowSize()
	}
	if st.local != nil {
		restore, err := makeRaw(st.local)
		if err != nil {
			return guest.ExecResult{}, err
		}
		defer restore()
		sizes, stop := st.followWindow()
		defer stop()
		aio.Resize = sizes
	}
	res, err := s.Attach(ctx, areq, aio)
	return res, errors.Join(err, out.Close(), errOut.Close())
}

// windowSize is the size of the local terminal: stdout's, else stdin's.
func (st *execStreams) windowSize() (guest.WindowSize, bool) {
	for _, w := range []any{st.stdout, st.stdin} {
		if f := terminalFile(w); f != nil {
			if cols, rows, err := term.GetSize(int(f.Fd())); err == nil {
				return guest.WindowSize{Rows: uint16(rows), Cols: uint16(cols)}, true
			}
		}
	}
	return guest.WindowSize{}, false
}

// followWindow sends the terminal's size on each SIGWINCH until stop.
func (st *execStreams) followWindow() (<-chan guest.WindowSize, func()) {
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
			ws, ok := st.windowSize()
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

// terminalFile is v as a file if it is a terminal, else nil.
func terminalFile(v any) *os.File {
	f, ok := v.(*os.File)
	if !ok || f == nil || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return f
}

func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return true
		}
	}
	return false
}

// capWriter passes the first max bytes of a stream (all when max is 0)
// and fails with an *outputCutError past them, which stops the command.
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
	return int(room), &outputCutError{max: c.max}
}

// outputCutError says the output passed --max-output.
type outputCutError struct{ max int64 }

func (e *outputCutError) Error() string {
	return fmt.Sprintf("output cut at %s (--max-output); rerun with --max-output 0 for all of it", sizeName(e.max))
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
