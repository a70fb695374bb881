package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/guest"
)

// Defaults of Env.
const (
	// DefaultTimeout is a command's timeout when neither the call nor the Env sets one.
	DefaultTimeout = 2 * time.Minute
	// MaxTimeout is the longest timeout a call may ask for.
	MaxTimeout = 30 * time.Minute
	// DefaultMaxOutput caps the text of one result when the Env sets no cap.
	DefaultMaxOutput = 30_000
)

// errNoGuest means a tool was run without a sandbox to run in.
var errNoGuest = errors.New("tools: env has no guest")

func (e *Env) timeout(seconds int) time.Duration {
	switch {
	case seconds > 0:
		return min(time.Duration(seconds)*time.Second, MaxTimeout)
	case e.Timeout > 0:
		return min(e.Timeout, MaxTimeout)
	}
	return DefaultTimeout
}

// captureMax is how much output to ask the guest for: all that may be
// spilled, or just what is shown.
func (e *Env) captureMax() int {
	if e.SpillDir != "" {
		return max(SpillCapture, e.maxOutput())
	}
	return e.maxOutput()
}

func (e *Env) maxOutput() int {
	if e.MaxOutput > 0 {
		return e.MaxOutput
	}
	return DefaultMaxOutput
}

// guest returns the env's guest client, or an error when there is none.
func (e *Env) guest() (*guest.Client, error) {
	if e == nil || e.Guest == nil {
		return nil, errNoGuest
	}
	return e.Guest, nil
}

// errorf is a failure the model reads.
func errorf(format string, args ...any) Result {
	return Result{Text: fmt.Sprintf(format, args...), IsError: true}
}

// decodeInput checks a call's input; ok is false when the returned Result
// (an error for the model) should be returned as is.
func decodeInput(tool string, s *schema, input json.RawMessage, dst any) (Result, bool) {
	if err := s.decode(input, dst); err != nil {
		return errorf("invalid input for %s: %v. Expected %s", tool, err, s.usage()), false
	}
	return Result{}, true
}

// slowFailure is failure for the desktop and kernel calls, whose guest work
// (starting a service, restarting a kernel) may outlast the call's own
// deadline: while the job goes on, that is a result the model reads, not
// the end of the job.
func slowFailure(ctx context.Context, tool string, err error) (Result, error) {
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return errorf("%s: the sandbox did not answer in time: %v. Try again; a hung service is restarted", tool, err), nil
	}
	return failure(tool, err)
}

// failure sorts an error from the guest. The guest's refusal (a path outside
// the workspace, a missing file, a bad pattern) is a result for the model; a
// guest that cannot be reached or a call canceled by ctx is a Go error.
func failure(tool string, err error) (Result, error) {
	var ge *guest.Error
	if errors.Is(err, guest.ErrTooLarge) && !errors.As(err, &ge) {
		return errorf("%s: the guest's answer was larger than allowed: %v", tool, err), nil
	}
	if !errors.As(err, &ge) {
		return Result{}, fmt.Errorf("%s: %w", tool, err)
	}
	msg := ge.Message
	switch ge.Code {
	case guest.CodePathEscape:
		msg += ". Only files inside /workspace can be used; relative paths are relative to /workspace"
	case guest.CodeNotFound:
		msg += ". Use list_files to see what exists"
	case guest.CodeIsDir:
		msg += ". Use list_files to see a directory's contents"
	}
	return errorf("%s: %s", tool, msg), nil
}

// Truncate returns text cut to at most max bytes: its head and its tail, with
// a marker line between them saying how much was left out. Cuts fall on line
// boundaries when one is near, and never inside a UTF-8 sequence.
func Truncate(text string, max int) string {
	if len(text) <= max || max <= 0 {
		return text
	}
	// The marker's width with len(text) bounds its width with the real count.
	room := max - len(fmt.Sprintf(truncMarker, len(text)))
	if room < 40 {
		return strings.ToValidUTF8(text[:max], "")
	}
	head := cutBack(text[:room/2], room/8)
	tail := cutFront(text[len(text)-(room-len(head)):], room/8)
	return head + fmt.Sprintf(truncMarker, len(text)-len(head)-len(tail)) + tail
}

const truncMarker = "\n[... %d bytes omitted ...]\n"

// cutBack ends s after its last newline if that loses at most slack bytes,
// else at the last whole rune.
func cutBack(s string, slack int) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 && len(s)-i-1 <= slack {
		return s[:i+1]
	}
	for range utf8.UTFMax - 1 { // drop a rune cut in its middle
		if r, size := utf8.DecodeLastRuneInString(s); s == "" || r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}

// cutFront starts s after its first newline if that loses at most slack
// bytes, else at the first whole rune.
func cutFront(s string, slack int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < slack {
		return s[i+1:]
	}
	for range utf8.UTFMax - 1 {
		if s == "" || utf8.RuneStart(s[0]) {
			break
		}
		s = s[1:]
	}
	return s
}

// canceled reports whether ctx has ended, with its cause.
func canceled(ctx context.Context) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}
