package wiring

import (
	"cmp"
	"context"
	"errors"
	"io"
	"os"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/attach"
	"github.com/agentbox/agentbox/internal/render"
)

// StreamFlags are `agentbox exec`'s options on its streams, as typed.
type StreamFlags struct {
	// TTY is -t; Raw is --raw.
	TTY, Raw bool
	// Interactive is -i, and InteractiveSet whether it was given.
	Interactive, InteractiveSet bool
	// Env is the command's --env, where a TERM of its own may be.
	Env []string
	// MaxOutput is --max-output as typed ("" for the default).
	MaxOutput string
}

// ExecStreams are what an exec'd command is attached to: the streams
// as given, and raw to pass the sandbox's bytes unchanged.
type ExecStreams struct {
	attach.Streams
	raw bool
}

// NewExecStreams reads f against the streams in, out and errw: whether
// stdin is forwarded, the local terminal put in raw mode and followed,
// and the output's cap. A bad --max-output is an error.
func NewExecStreams(in io.Reader, out, errw io.Writer, f StreamFlags) (*ExecStreams, error) {
	st := &ExecStreams{Streams: attach.Streams{Stdout: out, Stderr: errw, TTY: f.TTY}, raw: f.Raw || f.TTY}
	inTerminal := attach.TerminalFile(in) != nil
	forward := !inTerminal || f.TTY
	if f.InteractiveSet {
		forward = f.Interactive
	}
	if forward {
		st.Stdin = in
	}
	if f.TTY && forward && inTerminal {
		st.Local = attach.TerminalFile(in)
	}
	if f.TTY {
		st.Window = cmp.Or(attach.TerminalFile(st.Stdout), attach.TerminalFile(in))
	}
	if f.TTY && !attach.HasEnv(f.Env, "TERM") {
		st.TermEnv = cmp.Or(os.Getenv("TERM"), "xterm-256color")
	}
	max, err := attach.ParseMaxOutput(f.MaxOutput, attach.TerminalFile(st.Stdout) != nil && !f.TTY)
	st.MaxOutput = max
	return st, err
}

// Run runs req in s attached to the streams, what the sandbox wrote
// shown inert on a terminal unless raw, and returns its result
// (ExecRequest.Attach).
func (st *ExecStreams) Run(ctx context.Context, s *Scratch, req guest.ExecRequest) (guest.ExecResult, error) {
	out, errOut := render.ForTerminal(st.Stdout, st.raw), render.ForTerminal(st.Stderr, st.raw)
	as := st.Streams
	as.Stdout, as.Stderr = out, errOut
	res, err := attach.Run(ctx, s, req, as)
	return res, errors.Join(err, out.Close(), errOut.Close())
}
