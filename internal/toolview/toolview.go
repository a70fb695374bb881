// Package toolview reads an agent's tool calls and results for a person:
// what a call does (a command run, a file written or edited, a file read,
// a directory listed) from its JSON input, and a result's text split into
// the streams the tools label for the model (<stdout>…</stdout>,
// <stderr>…</stderr>). The web UI (internal/ui) shows steps from it; the
// terminal's printer (internal/render) can read results the same way. It
// styles nothing and escapes nothing: callers do, for their medium.
package toolview

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Kind is what a call does, as a person reads it.
type Kind string

// The kinds of call.
const (
	Command Kind = "command" // bash: Code is the command
	Code    Kind = "code"    // python, run_code: Code is the program
	Write   Kind = "write"   // write_file: Path, New is the content
	Edit    Kind = "edit"    // edit_file: Path, Old and New
	Read    Kind = "read"    // read_file, list_files, search_files: one Line
	Other   Kind = "other"   // any other tool: its Args
)

// Call is a tool call as a person reads it. Its strings are the input's
// as they are (no JSON escapes, control characters kept: the caller
// drops or escapes them).
type Call struct {
	Tool string
	Kind Kind
	// Line is the call on one line: "read src/a.go lines 3-10",
	// "list src (recursive)", "search \"TODO\" in src", "write a.txt",
	// "edit a.go (all)", "$ " and a command's first line; "" for Other.
	Line string
	Code string // Command's, Code's
	Path string // Write's, Edit's, Read's
	// Old and New are an edit's strings; New alone is a write's content.
	Old, New string
	Args     []Arg // Other's input, keys sorted
}

// Arg is one key of a call's input and its value as text: a string as it
// is, another value as compact JSON.
type Arg struct{ Key, Value string }

// ParseCall reads the call of tool name with its JSON input; an input it
// cannot read is shown as the one argument "input".
func ParseCall(name string, input json.RawMessage) Call {
	c := Call{Tool: name, Kind: Other}
	var in map[string]any
	if len(input) > 0 && json.Unmarshal(input, &in) != nil {
		c.Args = []Arg{{"input", string(input)}}
		return c
	}
	str := func(k string) string { v, _ := in[k].(string); return v }
	c.Path = str("path")
	switch name {
	case "bash":
		c.Kind, c.Code = Command, str("command")
		c.Line = "$ " + firstLine(c.Code)
	case "python", "run_code":
		c.Kind, c.Code = Code, str("code")
		c.Line = strings.TrimSpace(name + " " + str("language"))
	case "write_file":
		c.Kind, c.New = Write, str("content")
		c.Line = "write " + c.Path
	case "edit_file":
		c.Kind, c.Old, c.New = Edit, str("old_string"), str("new_string")
		c.Line = "edit " + c.Path + flag(in, "replace_all", " (all)")
	case "read_file":
		c.Kind, c.Line = Read, "read "+c.Path+LineRange(in)
	case "list_files":
		c.Kind, c.Line = Read, "list "+c.Path+flag(in, "recursive", " (recursive)")
	case "search_files":
		c.Kind, c.Line = Read, "search "+quote(str("pattern"))+" in "+cmpOr(c.Path, ".")+prefixed(" ", str("glob"))+flag(in, "ignore_case", " (any case)")
	default:
		for _, k := range slices.Sorted(maps.Keys(in)) {
			c.Args = append(c.Args, Arg{k, valueText(in[k])})
		}
	}
	return c
}

// Section is a part of a tool result's text: Stream is "stdout" or
// "stderr" for what a command wrote there, "" for the tool's own lines
// (the exit code, notes).
type Section struct {
	Stream string
	Text   string
}

// Sections splits a tool result's text at the tools' stream labels: a
// line "<stdout>" or "<stderr>" opens a section, the first line
// "</stdout>" or "</stderr>" after it closes it (so output that prints a
// closing label itself ends its section early: the split is for reading,
// not a boundary anything relies on). Text outside them is a section of
// Stream "". Sections in order, none empty; a text without labels is one
// section of Stream "".
func Sections(text string) []Section {
	var out []Section
	var cur strings.Builder
	stream := ""
	emit := func() {
		if cur.Len() > 0 {
			out = append(out, Section{Stream: stream, Text: cur.String()})
			cur.Reset()
		}
	}
	for rest := text; rest != ""; {
		line, tail, found := strings.Cut(rest, "\n")
		rest = tail
		switch {
		case stream == "" && (line == "<stdout>" || line == "<stderr>"):
			emit()
			stream = line[1 : len(line)-1]
			continue
		case stream != "" && line == "</"+stream+">":
			emit()
			stream = ""
			continue
		}
		cur.WriteString(line)
		if found {
			cur.WriteByte('\n')
		}
	}
	emit()
	return out
}

// firstLine is s's first non-blank line, trimmed.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

// LineRange is a read's " lines 3-10" when the call names lines.
func LineRange(in map[string]any) string {
	start, _ := in["start_line"].(float64)
	end, _ := in["end_line"].(float64)
	switch {
	case start == 0 && end == 0:
		return ""
	case end == 0:
		return fmt.Sprintf(" from line %d", int(start))
	}
	return fmt.Sprintf(" lines %d-%d", max(int(start), 1), int(end))
}

// flag is note when the input's boolean key is true.
func flag(in map[string]any, key, note string) string {
	if in[key] == true {
		return note
	}
	return ""
}

func quote(s string) string { return `"` + s + `"` }

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// valueText is an input value as text: a string as it is, another value
// as compact JSON without HTML escapes.
func valueText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSpace(b.String())
}
