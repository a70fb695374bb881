package render

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"golang.org/x/term"

	"github.com/agentbox/agentbox/internal/toolview"
)

// The bounds of what a step shows of a long text: a result's first and
// last lines, a command's, and the lines of a file edit or write.
const (
	foldHead  = 10
	foldTail  = 10
	diffLines = 10
	valueRun  = 80 // runes of a value on a tool call's line
)

// ANSI colours, used only when colour is on (see ColorOn).
const (
	red   = "\033[31m"
	green = "\033[32m"
	dim   = "\033[2m"
	reset = "\033[0m"
)

// ColorOn reports whether what is written to w may be coloured: only when
// w is a terminal and NO_COLOR is not set (https://no-color.org).
func ColorOn(w io.Writer) bool {
	if _, set := os.LookupEnv("NO_COLOR"); set {
		return false
	}
	return isTerminal(w)
}

// isTerminal reports whether w is a file open on a terminal that takes
// escape sequences (TERM is not "dumb"), or a writer that wraps one and
// says so (Live's).
func isTerminal(w io.Writer) bool {
	if t, ok := w.(interface{ Terminal() bool }); ok {
		return t.Terminal()
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb"
}

// toolCall renders a tool call the way a terminal session reads: a bash
// command as "$ command", a file write or edit as a short diff, a read or
// a list as one line with the path, any other tool as "▶ name key=value…".
func (s *Steps) toolCall(name string, input json.RawMessage) string {
	var in map[string]any
	_ = json.Unmarshal(input, &in)
	str := func(k string) string { v, _ := in[k].(string); return printable(v) }
	path := firstLine(str("path"), valueRun*4)
	switch name {
	case "bash":
		return commandLines(str("command"))
	case "read_file":
		return "▶ read " + path + toolview.LineRange(in) + "\n"
	case "list_files":
		return "▶ list " + path + flag(in, "recursive", " (recursive)") + "\n"
	case "write_file":
		return "▶ write " + path + "\n" + s.diff("", str("content"))
	case "edit_file":
		return "▶ edit " + path + flag(in, "replace_all", " (all)") + "\n" + s.diff(str("old_string"), str("new_string"))
	}
	return "▶ " + printable(name) + keyValues(in) + "\n"
}

// commandLines is a shell command as typed at a prompt: "$ " before its
// first line, its other lines indented as continuations, folded when long.
func commandLines(cmd string) string {
	lines := fold(strings.Split(strings.TrimRight(cmd, "\n"), "\n"))
	var sb strings.Builder
	for i, l := range lines {
		sb.WriteString(choose(i == 0, "$ ", "  ") + l + "\n")
	}
	return sb.String()
}

// diff is a short unified-style diff of old to new: old's lines with "-",
// new's with "+", each side cut to diffLines lines, red and green when
// colour is on.
func (s *Steps) diff(old, new string) string {
	var sb strings.Builder
	s.diffSide(&sb, "-", red, old)
	s.diffSide(&sb, "+", green, new)
	return sb.String()
}

// diffSide writes one side of a diff, its lines marked with sign.
func (s *Steps) diffSide(sb *strings.Builder, sign, colour, text string) {
	if text == "" {
		return
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, l := range lines {
		if i == diffLines {
			fmt.Fprintf(sb, "  … %d more lines\n", len(lines)-diffLines)
			return
		}
		if s.color {
			fmt.Fprintf(sb, "  %s%s%s%s\n", colour, sign, l, reset)
		} else {
			fmt.Fprintf(sb, "  %s%s\n", sign, l)
		}
	}
}

// fold keeps a long text's first foldHead and last foldTail lines, with a
// line between them that counts the lines hidden.
func fold(lines []string) []string {
	if len(lines) <= foldHead+foldTail+1 {
		return lines
	}
	hidden := len(lines) - foldHead - foldTail
	out := slices.Clip(lines[:foldHead])
	out = append(out, fmt.Sprintf("… %d lines hidden …", hidden))
	return append(out, lines[len(lines)-foldTail:]...)
}

// flag is note when the call's boolean key is true.
func flag(in map[string]any, key, note string) string {
	return choose(in[key] == true, note, "")
}

// keyValues is a call's input as " key=value…", keys sorted, each value
// on one line as it is (no JSON escapes), quoted when it has spaces.
func keyValues(in map[string]any) string {
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(in)) {
		v := valueText(in[k])
		if strings.ContainsAny(v, " \t") || v == "" {
			v = `"` + v + `"`
		}
		sb.WriteString(" " + printable(k) + "=" + v)
	}
	return sb.String()
}

// valueText is one input value on one line: strings as they are, other
// values as compact JSON without HTML escapes.
func valueText(v any) string {
	s, ok := v.(string)
	if !ok {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v)
		s = strings.TrimSpace(b.String())
	}
	return printable(firstLine(s, valueRun))
}

// mapKeys yields m's keys.
func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// choose is a when c holds, else b.
func choose(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}
