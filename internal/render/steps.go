// Package render draws what the CLI shows a person on a terminal: a job's
// steps as they happen (for logs, run, chat and submit --follow), the job
// and job-list tables of status and list, and a download's progress. It
// writes text only; commands choose the writers, flags and exit codes.
//
// Text that comes from a sandbox or a model never reaches the terminal with
// its control characters: escape sequences could rewrite the screen or the
// clipboard.
package render

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/event"
)

// Steps shows a job's events the way a person follows a job: what the job
// did (commands' output, the model's text, tool results) on out, and
// bookkeeping (states, commands, exit codes, tool calls) as short lines on
// errw.
type Steps struct {
	out, errw io.Writer
	color     bool // colour the steps on errw
	outColor  bool // colour what goes to out
	live      callOutput
}

// NewSteps returns the printer of events to out and errw. The steps on
// errw are coloured only when errw is a terminal and NO_COLOR is not set.
func NewSteps(out, errw io.Writer) *Steps {
	return &Steps{out: out, errw: errw, color: ColorOn(errw), outColor: ColorOn(out)}
}

// Show prints one event from its type and stored payload. An event of a
// type it does not know, or one it has no line for, is shown raw.
func (s *Steps) Show(typ string, payload json.RawMessage) error {
	ev, _ := event.Decode(typ, payload)
	if _, ok := ev.(event.Output); !ok {
		s.endOutput()
	}
	var err error
	switch ev := ev.(type) {
	case event.Model:
		err = s.showModel(ev)
	case event.ToolCall:
		_, err = io.WriteString(s.errw, s.toolCall(ev.Name, ev.Input))
	case event.ToolResult:
		err = s.showResult(ev)
	case event.Notice:
		err = s.line("[agentbox] %s", ev.Text)
	case event.Output:
		err = s.showOutput(ev)
	case event.State:
		err = s.line("[%s]%s%s", ev.Status, prefixed(" attempt ", nonZero(ev.Attempt)), prefixed(" ", ev.Error))
	case event.Command:
		err = s.line("$ %s", firstLine(ev.Command, 200))
	case event.Exit:
		_, err = fmt.Fprintf(s.errw, "[exit %d after %dms%s]\n", ev.ExitCode, ev.DurationMS, exitNotes(ev))
	case event.Sandbox:
		err = s.line("[sandbox %s ready in %dms]", ev.SandboxID, ev.ReadyMS)
	case event.Log:
		err = s.line("[%s] %s", cmp.Or(ev.Level, "log"), ev.Message)
	case event.Message:
		_, err = fmt.Fprintf(s.errw, "» message (turn %d): %s\n", ev.Turn, printable(firstLine(ev.Text, 300)))
	case event.Git:
		_, err = fmt.Fprintln(s.errw, gitLine(ev))
	case event.Checkpoint:
		err = s.line("%s", checkpointLine(ev))
	case event.Network:
		err = s.showNetwork(ev)
	case event.NetworkPolicy:
		err = s.line("%s", policyLine(ev))
	default:
		err = s.line("[%s] %s", typ, firstLine(string(payload), 200))
	}
	return err
}

// line prints a bookkeeping line on errw without control characters:
// its fields may come from a sandbox, a model server or a stored log.
func (s *Steps) line(format string, args ...any) error {
	_, err := fmt.Fprintln(s.errw, printable(fmt.Sprintf(format, args...)))
	return err
}

// checkpointLine is a checkpoint on one line:
// "[checkpoint workspace step 3: 120 files, 1 uploaded, 12ms]".
func checkpointLine(ev event.Checkpoint) string {
	if ev.Error != "" {
		return fmt.Sprintf("[checkpoint %s step %d failed: %s]", ev.Tree, ev.Step, ev.Error)
	}
	return fmt.Sprintf("[checkpoint %s step %d: %d files, %d uploaded, %dms]", ev.Tree, ev.Step, ev.Files, ev.Uploaded, ev.MS)
}

// gitLine is what the host did with a job's repository, on one line:
// "[git clone https://host/r.git ref main branch agentbox/job_… 1a2b3c4d5e6f]".
func gitLine(ev event.Git) string {
	parts := []string{"git", ev.Action}
	for _, p := range []string{ev.URL, prefixed("ref ", ev.Ref), prefixed("branch ", ev.Branch), ev.Commit[:min(len(ev.Commit), 12)]} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	line := strings.Join(parts, " ")
	if ev.Error != "" {
		line += " failed: " + firstLine(ev.Error, 300)
	}
	return "[" + printable(line) + "]"
}

// Payload prints an event as it is emitted, before it is stored.
func (s *Steps) Payload(p event.Payload) error {
	typ, b, err := event.Marshal(p)
	if err != nil {
		return err
	}
	return s.Show(typ, b)
}

// Text prints the model's text as it streams, a piece at a time.
func (s *Steps) Text(delta string) error {
	_, err := io.WriteString(s.out, printable(delta))
	return err
}

// Note prints a line of the CLI's own (not the job's) among the steps,
// without control characters: it may quote a model server's error.
func (s *Steps) Note(line string) error { return s.line("%s", line) }

// Status prints a status line of the CLI's own among the steps, dimmed
// when colour is on.
func (s *Steps) Status(line string) error {
	if s.color {
		line = dim + line + reset
	}
	_, err := fmt.Fprintln(s.errw, line)
	return err
}

// showModel prints the model's text of a step.
func (s *Steps) showModel(ev event.Model) error {
	if text := strings.TrimSpace(ev.Message.PlainText()); text != "" {
		_, err := fmt.Fprintf(s.out, "%s\n", printable(text))
		return err
	}
	return nil
}

// showResult prints a tool's result, folded to its head and tail when
// long.
func (s *Steps) showResult(ev event.ToolResult) error {
	if ok, err := s.showExecResult(ev); ok {
		return err
	}
	if ok, err := s.showCellResult(ev); ok {
		return err
	}
	lines := fold(strings.Split(strings.TrimRight(printable(ev.Text), "\n"), "\n"))
	mark := choose(ev.IsError, "✗", "│")
	var sb strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&sb, "  %s %s\n", mark, l)
	}
	_, err := io.WriteString(s.out, sb.String())
	return err
}

// Printable is s without control characters but newline and tab, for a
// line of a command's own that quotes what a sandbox or a model wrote
// (a job's result, a link's name).
func Printable(s string) string { return printable(s) }

// printable drops control characters but newline and tab (see control):
// text from the sandbox or the model must not drive the terminal.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if control(r) {
			return -1
		}
		return r
	}, s)
}

// bidiControl reports the explicit bidirectional formatting characters,
// which make text read in another order than it runs (a command shown as
// one thing, run as another: "Trojan Source").
func bidiControl(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

func exitNotes(ev event.Exit) string {
	var notes []string
	if ev.TimedOut {
		notes = append(notes, "timed out")
	}
	if ev.Truncated {
		notes = append(notes, "output truncated")
	}
	return prefixed(", ", strings.Join(notes, ", "))
}

// nonZero renders n, or "" for 0 (a field the event does not have).
func nonZero(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// prefixed is prefix+s, or "" when s is.
func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

// firstLine returns s's first line, cut to n runes.
func firstLine(s string, n int) string {
	s, _, cut := strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > n {
		s, cut = string(r[:n]), true
	}
	if cut {
		s += "…"
	}
	return s
}
