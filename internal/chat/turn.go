package chat

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentbox/agentbox/internal/agent"
)

// Help lists what the user can type.
const Help = `Type a message and press Enter; a pasted block of several lines is one
message (end a line with \ to continue typing on the next one).
  /help            this help
  /clear           forget the conversation (the workspace stays)
  /load SESSION    switch to a saved session (its history and workspace)
  /sessions        list saved sessions
  /quit            save and leave (also Ctrl-D)`

// maxTurnSteps bounds the model steps of one chat turn.
const maxTurnSteps = 50

// Input gives the session the user's messages, one per call to Next; an
// error of io.EOF means the user is done.
type Input interface {
	Next() (string, error)
}

// Run reads messages from in and answers them until the user quits (/quit
// or the input's end, nil), the context is canceled, or a turn is
// interrupted (ErrInterrupted). The session stays open: Close it after.
func (s *Session) Run(ctx context.Context, in Input) error {
	for {
		msg, err := in.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
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
		entries, _ := os.ReadDir(s.cfg.Dir)
		for _, e := range entries {
			fmt.Fprintln(errw, e.Name())
		}
	case "/load":
		if len(fields) != 2 || !sessionName.MatchString(fields[1]) {
			fmt.Fprintln(errw, "usage: /load SESSION (letters, digits, '.', '_' and '-')")
			return false, nil
		}
		s.Close(ctx)
		return false, s.open(ctx, fields[1])
	default:
		fmt.Fprintf(errw, "unknown command %s\n%s\n", fields[0], Help)
	}
	return false, nil
}

// turn works on one user message until the model hands the turn back.
func (s *Session) turn(ctx context.Context, msg string) error {
	s.loop.Say(msg)
	for range maxTurnSteps {
		res, err := s.loop.Step(ctx)
		if err != nil {
			s.loop.Messages = agent.CloseDangling(s.loop.Messages, "interrupted")
			s.save()
			if ctx.Err() != nil {
				return ErrInterrupted
			}
			fmt.Fprintln(s.cfg.Err, "agentbox:", err)
			return nil // the session goes on; the user may retry
		}
		s.save()
		if res.Finish != nil || res.ToolCalls == 0 {
			return nil
		}
	}
	fmt.Fprintf(s.cfg.Err, "[agentbox] stopped this turn after %d steps\n", maxTurnSteps)
	return nil
}
