package main

import (
	"cmp"
	"context"
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/attach"
	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/wiring"
)

// exitOutputCut is exec's exit status when the output was cut.
const exitOutputCut = wiring.ExitOutputCut

// execStreams are what an exec'd command is attached to: the streams
// as given, and raw to pass the sandbox's bytes unchanged.
type execStreams struct {
	attach.Streams
	raw bool
}

// newExecStreams reads -i, -t and --max-output against the streams cmd has.
func newExecStreams(cmd *cobra.Command, f execFlags) (*execStreams, error) {
	st := &execStreams{Streams: attach.Streams{Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(), TTY: f.tty}, raw: f.raw || f.tty}
	in := cmd.InOrStdin()
	inTerminal := attach.TerminalFile(in) != nil
	forward := !inTerminal || f.tty
	if cmd.Flags().Changed("interactive") {
		forward = f.interactive
	}
	if forward {
		st.Stdin = in
	}
	if f.tty && forward && inTerminal {
		st.Local = attach.TerminalFile(in)
	}
	if f.tty {
		st.Window = cmp.Or(attach.TerminalFile(st.Stdout), attach.TerminalFile(in))
	}
	if f.tty && !attach.HasEnv(f.Env, "TERM") {
		st.TermEnv = cmp.Or(os.Getenv("TERM"), "xterm-256color")
	}
	max, err := attach.ParseMaxOutput(f.maxOutput, attach.TerminalFile(st.Stdout) != nil && !f.tty)
	st.MaxOutput = max
	return st, err
}

// run runs req in s attached to the streams, what the sandbox wrote
// shown inert on a terminal unless raw, and returns its result.
func (st *execStreams) run(ctx context.Context, s *wiring.Scratch, req guest.ExecRequest) (guest.ExecResult, error) {
	out, errOut := render.ForTerminal(st.Stdout, st.raw), render.ForTerminal(st.Stderr, st.raw)
	as := st.Streams
	as.Stdout, as.Stderr = out, errOut
	res, err := attach.Run(ctx, s, req, as)
	return res, errors.Join(err, out.Close(), errOut.Close())
}
