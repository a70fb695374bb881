package wiring

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/attach"
	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// ExitOutputCut is exec's exit status when the output was cut: at
// --max-output, or output of processes the command left running, still
// coming 30s after it ended.
const ExitOutputCut = 3

// ExecRequest is one command `agentbox exec` runs in a fresh sandbox.
type ExecRequest struct {
	Spec    sandbox.Spec
	Command guest.ExecRequest
	// Network is the sandbox's way out; its Say is set unless Quiet.
	Network ScratchNetwork
	// Quiet says nothing but what goes wrong.
	Quiet bool
	// Attach runs req in s, attached to the caller's streams.
	Attach func(ctx context.Context, s *Scratch, req guest.ExecRequest) (guest.ExecResult, error)
}

// Exec runs r in a fresh sandbox, removed whatever happens, and returns
// exec's exit status: the command's, or agentbox's own (1: the sandbox
// stopped answering or was stopped; 3: the output was cut; 130:
// interrupted). What agentbox says of the run goes to stderr.
func Exec(ctx context.Context, cfg config.Config, log *slog.Logger, r ExecRequest, stderr io.Writer) (int, error) {
	timeout := time.Duration(r.Command.TimeoutMS) * time.Millisecond
	if !r.Quiet {
		r.Network.Say = stderr
	}
	s, err := NewScratch(ctx, cfg, log, r.Spec, timeout, r.Network)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err := s.Close(); err != nil {
			fmt.Fprintln(stderr, "agentbox: removing the sandbox:", err)
		}
	}()
	if !r.Quiet {
		fmt.Fprintf(stderr, "agentbox: sandbox %s ready in %v\n", s.ID, s.Took.Round(time.Millisecond))
	}
	res, err := r.Attach(ctx, s, r.Command)
	if err != nil {
		return ExecFailed(stderr, err, ctx.Err() != nil)
	}
	if res.Truncated {
		fmt.Fprintln(stderr, "agentbox: output cut: processes the command left running were still writing 30s after it ended")
		return ExitOutputCut, nil
	}
	if !r.Quiet {
		switch {
		case res.TimedOut:
			fmt.Fprintf(stderr, "agentbox: command timed out after %v and was killed\n", timeout)
		case res.OOMKilled:
			fmt.Fprintln(stderr, "agentbox: command was killed for running out of memory")
		}
	}
	return exitStatus(stderr, res.ExitCode), nil
}

// exitStatus is the status exec exits with for the command's exit code as
// the guest reported it: the code itself when a process can exit with it
// (0-255), else 1 with a line saying so, so that a guest's 256 is not taken
// by the shell for success.
func exitStatus(stderr io.Writer, code int) int {
	if code >= 0 && code <= 255 {
		return code
	}
	fmt.Fprintf(stderr, "agentbox: the sandbox reported exit code %d, which no process exits with; exiting 1\n", code)
	return 1
}

// ExecFailed says on stderr how a command's run ended in err, and returns
// exec's exit status; interrupted is Ctrl-C's. The error may quote the
// guest (its health check's answer): its controls are shown, never acted on.
func ExecFailed(stderr io.Writer, err error, interrupted bool) (int, error) {
	var stopped *StoppedError
	var cut *attach.OutputCutError
	say := func(format string, a ...any) {
		v := render.NewVisible(stderr)
		fmt.Fprintf(v, format, a...)
		v.Close()
	}
	switch {
	case errors.As(err, &cut):
		say("agentbox: %v\n", cut)
		return ExitOutputCut, nil
	case errors.As(err, &stopped):
		say("agentbox: %v\n", err)
		return 1, nil
	case errors.Is(err, ErrStoppedAnswering):
		// Said now: the deferred Close removes the sandbox before main could print it.
		say("agentbox: %v; removing it\n", err)
		return 1, nil
	case interrupted:
		return 130, nil // interrupted: the sandbox is removed by the deferred Close
	}
	return 0, fmt.Errorf("exec: %w", err)
}
