package chat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/agent"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/render"
)

// Help lists what the user can type.
const Help = `Type a message and press Enter; a pasted block of several lines is one
message. Alt-Enter or a trailing \ starts a new line; Up and Down recall
earlier messages; Ctrl-C clears the line or cancels the running turn.
  /help            this help
  /clear           forget the conversation (the workspace stays)
  /load SESSION    switch to a saved session (its history and workspace)
  /sessions        list saved sessions: workspace, when saved, last message
  /quit            save and leave (also Ctrl-D)`

// maxTurnSteps bounds the model steps of one chat turn.
const maxTurnSteps = 50

// Input gives the session the user's messages, one per call to Next; an
// error of io.EOF means the user is done.
type Input interface {
	Next(ctx context.Context) (string, error)
}

// Interrupter is an Input that can ask to cancel the running turn (the
// terminal's Ctrl-C, typed while a turn runs): a value on Interrupts
// cancels the turn, not the session.
type Interrupter interface {
	Interrupts() <-chan struct{}
}

// Historian is an Input that keeps a history of what was typed; the
// session points it at the open session's file (and at the new one's
// after /load).
type Historian interface {
	UseHistory(path string) error
}

// Run reads messages from in and answers them until the user quits (/quit
// or the input's end, nil), or the context is canceled, at the prompt or
// in a turn (ErrInterrupted). The session stays open: Close it after.
func (s *Session) Run(ctx context.Context, in Input) error {
	s.in = in
	s.useHistory()
	for {
		msg, err := in.Next(ctx)
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil && ctx.Err() != nil:
			return ErrInterrupted // a signal at the prompt: as during a turn
		case err != nil:
			return err
		}
		if strings.TrimSpace(msg) == "" {
			continue
		}
		if quit, err := s.command(ctx, msg); quit || err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// command handles a /command or sends msg to the model; quit ends the session.
func (s *Session) command(ctx context.Context, msg string) (quit bool, err error) {
	fields := strings.Fields(msg)
	if !strings.HasPrefix(msg, "/") || strings.Contains(strings.TrimSpace(msg), "\n") {
		return false, s.turn(ctx, msg)
	}
	errw := s.cfg.Err
	switch fields[0] {
	case "/quit", "/exit":
		return true, nil
	case "/help":
		fmt.Fprintln(errw, Help)
	case "/clear":
		s.loop.Messages = nil
		s.save()
		fmt.Fprintln(errw, "conversation cleared; the workspace is kept")
	case "/sessions":
		list, err := List(s.cfg.Dir)
		if err == nil {
			err = WriteSessions(errw, list, s.name, time.Now())
		}
		if err != nil {
			fmt.Fprintln(errw, "agentbox:", err)
		}
	case "/load":
		if len(fields) != 2 || !sessionName.MatchString(fields[1]) {
			fmt.Fprintln(errw, "usage: /load SESSION (letters, digits, '.', '_' and '-')")
			return false, nil
		}
		return false, s.load(ctx, fields[1])
	default:
		fmt.Fprintf(errw, "unknown command %s\n%s\n", fields[0], Help)
	}
	return false, nil
}

// load switches to session name, with the workspace it was started on.
// When it cannot be opened, the user is told why and the session open
// before is opened again.
func (s *Session) load(ctx context.Context, name string) error {
	prev := s.name
	s.Close(ctx)
	err := s.open(ctx, name, Project{})
	if err != nil {
		fmt.Fprintf(s.cfg.Err, "agentbox: /load %s: %v\n", name, err)
		if err = s.open(ctx, prev, Project{}); err != nil {
			return err
		}
	}
	s.useHistory()
	return nil
}

// useHistory points a Historian input at the open session's history.
func (s *Session) useHistory() {
	if h, ok := s.in.(Historian); ok {
		if err := h.UseHistory(filepath.Join(s.dir, historyFile)); err != nil {
			fmt.Fprintln(s.cfg.Err, "agentbox: the prompt's history:", err)
		}
	}
}

// turn works on one user message until the model hands the turn back. An
// interrupt from the input cancels the turn alone: the conversation so
// far (closed where the cancel cut it) and the sandbox stay.
func (s *Session) turn(ctx context.Context, msg string) error {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if irq, ok := s.in.(Interrupter); ok {
		go cancelOn(tctx, irq.Interrupts(), cancel)
	}
	begin := struct {
		steps int
		usage llm.Usage
	}{s.loop.Steps, s.loop.Usage}
	s.live.Start("thinking")
	err := s.work(tctx, msg)
	elapsed := s.live.Stop()
	if errors.Is(err, errTurnCanceled) && ctx.Err() != nil {
		return ErrInterrupted // the whole session was interrupted
	}
	canceled := errors.Is(err, errTurnCanceled)
	used := s.loop.Usage.Add(negate(begin.usage))
	window := s.cfg.ContextWindow
	if window == 0 {
		window = s.cfg.Model.Info().ContextWindow
	}
	line := render.TurnLine(render.Turn{Steps: s.loop.Steps - begin.steps, Usage: used, CostUSD: s.cfg.Model.Info().Price.Cost(used),
		Context: s.loop.LastInput, Window: int64(window), Elapsed: elapsed, Canceled: canceled})
	if canceled {
		line += "; sandbox and conversation kept"
	}
	_ = s.steps.Status(line)
	return nil
}

// cancelOn cancels the turn of ctx at the first interrupt, until ctx ends.
func cancelOn(ctx context.Context, irq <-chan struct{}, cancel func()) {
	select {
	case <-irq:
		cancel()
	case <-ctx.Done():
	}
}

// errTurnCanceled is a turn's end by its own context's cancel.
var errTurnCanceled = errors.New("turn canceled")

// work runs the loop on msg until the model hands the turn back. A
// canceled ctx ends it with errTurnCanceled once the session is saved; a
// failure of the model or the sandbox is reported and ends the turn only.
func (s *Session) work(ctx context.Context, msg string) error {
	s.loop.Say(msg)
	for range maxTurnSteps {
		res, err := s.loop.Step(ctx)
		if err != nil {
			s.loop.Messages = agent.CloseDangling(s.loop.Messages, "interrupted")
			s.save()
			if ctx.Err() != nil {
				return errTurnCanceled
			}
			_ = s.steps.Note("agentbox: " + err.Error())
			return nil // the session goes on; the user may retry
		}
		s.save()
		if res.Finish != nil || res.ToolCalls == 0 {
			return nil
		}
	}
	_ = s.steps.Note(fmt.Sprintf("[agentbox] stopped this turn after %d steps", maxTurnSteps))
	return nil
}

// negate is -u, to subtract usages with Add.
func negate(u llm.Usage) llm.Usage {
	return llm.Usage{InputTokens: -u.InputTokens, OutputTokens: -u.OutputTokens, CacheReadTokens: -u.CacheReadTokens, CacheWriteTokens: -u.CacheWriteTokens}
}
