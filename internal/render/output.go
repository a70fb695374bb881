package render

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/event"
)

// callOutput is what Steps remembers of the output shown live: which
// calls had some, and where the last piece left the line.
type callOutput struct {
	shown   map[string]bool // calls whose output was shown as it ran
	midLine bool            // the last piece did not end its line
	stream  string          // of the last piece
}

// Output prefixes: a tool's stdout reads like its result, stderr is set
// apart (and red on a terminal).
const (
	outMark = "  │ "
	errMark = "  ! "
)

// showOutput prints a piece of a command's output as it is produced: a
// tool call's under its step, each line marked like the result's (stderr
// with "!", red on a terminal); the shell agent's script's as it is.
func (s *Steps) showOutput(ev event.Output) error {
	text := printable(ev.Text)
	if ev.Call == "" {
		if ev.Stream == "stderr" && s.outColor {
			text = red + text + reset
		}
		_, err := io.WriteString(s.out, text)
		return err
	}
	if s.live.shown == nil {
		s.live.shown = map[string]bool{}
	}
	s.live.shown[ev.Call] = true
	var sb strings.Builder
	if s.live.midLine && s.live.stream != ev.Stream {
		sb.WriteByte('\n') // the other stream's line is cut here
		s.live.midLine = false
	}
	mark := choose(ev.Stream == "stderr", errMark, outMark)
	for len(text) > 0 {
		line, rest, nl := strings.Cut(text, "\n")
		if !s.live.midLine {
			sb.WriteString(mark)
		}
		if ev.Stream == "stderr" && s.outColor && line != "" {
			line = red + line + reset
		}
		sb.WriteString(line)
		if nl {
			sb.WriteByte('\n')
		}
		s.live.midLine = !nl
		text = rest
	}
	s.live.stream = ev.Stream
	_, err := io.WriteString(s.out, sb.String())
	return err
}

// endOutput ends a line of live output left open, before other text.
func (s *Steps) endOutput() {
	if s.live.midLine {
		_, _ = io.WriteString(s.out, "\n")
		s.live.midLine = false
	}
}

// execResult is a command tool's result (bash, run_code) as the tool
// wrote it for the model: a summary ("exit code: 1 (failure)", or "not
// completed: canceled"), notes, then <stdout> and <stderr> sections and
// perhaps more text. ok is false for a text of another shape.
type execResult struct {
	summary string
	notes   []string
	stdout  []string
	stderr  []string
	rest    []string
}

func parseExecResult(text string) (r execResult, ok bool) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) == 0 || !(strings.HasPrefix(lines[0], "exit code: ") || strings.HasPrefix(lines[0], "not completed: ")) {
		return r, false
	}
	r.summary = strings.TrimPrefix(lines[0], "exit code: ")
	if r.summary != lines[0] {
		r.summary = "exit " + r.summary
	}
	var in *[]string
	for _, l := range lines[1:] {
		switch {
		case in == nil && l == "<stdout>":
			in = &r.stdout
		case in == nil && l == "<stderr>":
			in = &r.stderr
		case in != nil && (l == "</stdout>" || l == "</stderr>"):
			in = nil
		case in != nil:
			*in = append(*in, l)
		case l == "(no output)":
		case len(r.stdout)+len(r.stderr) == 0 && len(r.rest) == 0:
			r.notes = append(r.notes, l)
		default:
			r.rest = append(r.rest, l)
		}
	}
	return r, true
}

// showExecResult prints a command's result the way a terminal shows a
// command: its output, stderr set apart (unless it was shown as it ran),
// then one line of how it ended. ok is false when the result is not a
// command's.
func (s *Steps) showExecResult(ev event.ToolResult) (ok bool, err error) {
	r, ok := parseExecResult(printable(ev.Text))
	if !ok {
		return false, nil
	}
	var sb strings.Builder
	if !s.live.shown[ev.ID] {
		for _, l := range fold(r.stdout) {
			sb.WriteString(outMark + l + "\n")
		}
		for _, l := range fold(r.stderr) {
			if s.outColor {
				l = red + l + reset
			}
			sb.WriteString(errMark + l + "\n")
		}
	}
	delete(s.live.shown, ev.ID)
	line := r.summary
	for _, n := range r.notes {
		line += " · " + shortNote(n)
	}
	if ev.DurationMS > 0 {
		line += " · " + Elapsed(msDuration(ev.DurationMS))
	}
	failed := ev.IsError || strings.HasPrefix(r.summary, "not completed")
	fmt.Fprintf(&sb, "  %s %s\n", choose(failed, "✗", "✓"), line)
	for _, l := range fold(r.rest) {
		sb.WriteString(strings.TrimRight("  "+l, " ") + "\n")
	}
	_, err = io.WriteString(s.out, sb.String())
	return true, err
}

// shortNote is a result's note for a person, in a few words: "timed out
// after 2s", not the advice to the model that follows.
func shortNote(n string) string {
	for _, cut := range []string{" and was killed", ": the rest", ". ", "; "} {
		if i := strings.Index(n, cut); i > 0 {
			n = n[:i]
		}
	}
	return firstLine(strings.TrimSuffix(n, "."), 120)
}

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// showCellResult prints the python tool's result the way a notebook shows
// a cell's output: its <stderr> section's lines marked as stderr, without
// the tags. ok is false for another tool's result.
func (s *Steps) showCellResult(ev event.ToolResult) (ok bool, err error) {
	if ev.Name != "python" {
		return false, nil
	}
	mark := choose(ev.IsError, "✗", "│")
	var sb strings.Builder
	inErr := false
	for _, l := range fold(strings.Split(strings.TrimRight(printable(ev.Text), "\n"), "\n")) {
		switch {
		case l == "<stderr>" || l == "</stderr>":
			inErr = l == "<stderr>"
		case inErr && s.outColor:
			sb.WriteString(errMark + red + l + reset + "\n")
		case inErr:
			sb.WriteString(errMark + l + "\n")
		default:
			sb.WriteString("  " + mark + " " + l + "\n")
		}
	}
	_, err = io.WriteString(s.out, sb.String())
	return true, err
}
