package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/llm"
)

// NameEditFile is the edit_file tool's name.
const NameEditFile = "edit_file"

// EditMaxBytes is the largest file edit_file changes.
const EditMaxBytes = 8 << 20

// EditFileTool replaces an exact string in a file.
type EditFileTool struct{}

var editFileSchema = object([]string{"path", "old_string", "new_string"},
	str("path", "The file to edit: relative to /workspace or absolute inside /workspace."),
	str("old_string", "The exact text to replace, character for character, including indentation and line breaks, without read_file's line-number prefixes. Include enough surrounding lines to make it unique in the file."),
	str("new_string", "The text to put in its place (may be empty to delete old_string)."),
	boolean("replace_all", "Replace every occurrence of old_string instead of requiring exactly one (default false). Useful for renaming."),
)

const editFileDescription = `Change part of an existing file by exact string replacement: old_string is replaced by new_string.

- old_string must match the file exactly (whitespace and indentation included) and exactly once, unless replace_all is true. When it matches nothing or several places, nothing is changed and the error says why (and where the matches are); add surrounding lines to old_string to make it unique.
- Read the file first (read_file) and copy the text from it, leaving out the line-number prefix ("    12<tab>").
- To create a file or rewrite it entirely, use write_file. The file keeps its permissions; the write is atomic.
- Returns the changed region with line numbers, so you can check the result.`

// Spec describes the edit_file tool to the model.
func (EditFileTool) Spec() llm.Tool { return editFileSpec }

var editFileSpec = spec(NameEditFile, editFileDescription, editFileSchema)

type editFileInput struct {
	Path       string `json:"path"`
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all"`
}

// Run applies the replacement and shows the edited region.
func (EditFileTool) Run(ctx context.Context, env *Env, input json.RawMessage) (Result, error) {
	var in editFileInput
	if r, ok := decodeInput(NameEditFile, editFileSchema, input, &in); !ok {
		return r, nil
	}
	g, err := env.guest()
	if err != nil {
		return Result{}, err
	}
	if r, ok := checkEdit(in); !ok {
		return r, nil
	}
	fi, r, ok, err := statFile(ctx, g, NameEditFile, in.Path)
	if !ok || err != nil {
		return r, err
	}
	if fi.Size > EditMaxBytes {
		return errorf("edit_file: %s is %d bytes, over edit_file's limit of %d; change it with bash (sed, python3) instead", fi.Path, fi.Size, EditMaxBytes), nil
	}
	// Bounded: the file may have grown since the stat.
	data, err := g.ReadRange(ctx, in.Path, 0, EditMaxBytes+1)
	if err != nil {
		return failure(NameEditFile, err)
	}
	if len(data) > EditMaxBytes {
		return errorf("edit_file: %s grew past edit_file's limit of %d bytes; change it with bash (sed, python3) instead", fi.Path, EditMaxBytes), nil
	}
	return applyEdit(ctx, g, fi, string(data), in)
}

func checkEdit(in editFileInput) (Result, bool) {
	switch {
	case strings.TrimSpace(in.Path) == "":
		return errorf("edit_file: path is empty"), false
	case in.OldString == "":
		return errorf("edit_file: old_string is empty; give the exact text to replace. To create a file or replace all of it, use write_file"), false
	case in.OldString == in.NewString:
		return errorf("edit_file: old_string and new_string are the same; nothing to change"), false
	}
	return Result{}, true
}

func applyEdit(ctx context.Context, g *guest.Client, fi guest.FileInfo, content string, in editFileInput) (Result, error) {
	if bytes.IndexByte([]byte(content[:min(len(content), 8000)]), 0) >= 0 {
		return errorf("edit_file: %s is a binary file; edit_file changes text files only", fi.Path), nil
	}
	in = matchLineEndings(content, in)
	offsets := occurrences(content, in.OldString)
	switch {
	case len(offsets) == 0:
		return errorf("%s", noMatch(fi.Path, content, in.OldString)), nil
	case len(offsets) > 1 && !in.ReplaceAll:
		return errorf("edit_file: old_string matches %d times in %s, at lines %s; nothing was changed. Include more surrounding lines in old_string so that it matches exactly once, or set replace_all to true to replace every occurrence", len(offsets), fi.Path, joinInts(lineNumbers(content, offsets))), nil
	}
	updated := strings.ReplaceAll(content, in.OldString, in.NewString)
	if !in.ReplaceAll {
		updated = content[:offsets[0]] + in.NewString + content[offsets[0]+len(in.OldString):]
	}
	mode := fi.Mode
	if fi.Type != "file" {
		mode = 0
	}
	if _, err := g.WriteFile(ctx, in.Path, []byte(updated), mode); err != nil {
		return failure(NameEditFile, err)
	}
	return Result{Text: editSummary(fi.Path, content, updated, offsets, in)}, nil
}

// matchLineEndings lets a model that writes "\n" edit a file with CRLF line
// endings: if old_string only matches with "\r\n", both strings get them.
func matchLineEndings(content string, in editFileInput) editFileInput {
	if strings.Contains(in.OldString, "\r") || !strings.Contains(in.OldString, "\n") || strings.Contains(content, in.OldString) {
		return in
	}
	crlf := strings.ReplaceAll(in.OldString, "\n", "\r\n")
	if !strings.Contains(content, crlf) {
		return in
	}
	in.OldString = crlf
	in.NewString = strings.ReplaceAll(strings.ReplaceAll(in.NewString, "\r\n", "\n"), "\n", "\r\n")
	return in
}

// occurrences returns the byte offsets of the non-overlapping matches of s.
func occurrences(content, s string) []int {
	var out []int
	for off := 0; ; {
		i := strings.Index(content[off:], s)
		if i < 0 {
			return out
		}
		out = append(out, off+i)
		off += i + len(s)
	}
}

// lineNumbers returns the 1-based line of each offset (offsets ascending).
func lineNumbers(content string, offsets []int) []int {
	lines := make([]int, len(offsets))
	line, pos := 1, 0
	for i, off := range offsets {
		line += strings.Count(content[pos:off], "\n")
		pos = off
		lines[i] = line
	}
	return lines
}

// noMatch explains why old_string matched nothing, pointing at a near match.
func noMatch(path, content, old string) string {
	msg := fmt.Sprintf("edit_file: old_string was not found in %s; nothing was changed. It must match the file exactly, character for character.", path)
	if numberedLines.MatchString(old) {
		msg += " old_string seems to contain read_file's line-number prefixes (\"   12<tab>\"); leave them out."
		if stripped := numberedLines.ReplaceAllString(old, ""); strings.Contains(content, stripped) {
			line := lineNumbers(content, []int{strings.Index(content, stripped)})[0]
			return msg + fmt.Sprintf(" Without them it matches at line %d.", line)
		}
	}
	norm, pos := normalizeSpace(content)
	want, _ := normalizeSpace(old)
	if i := strings.Index(norm, want); want != "" && i >= 0 {
		line := lineNumbers(content, []int{pos[i]})[0]
		msg += fmt.Sprintf(" A match exists if whitespace is ignored, at line %d: the file's indentation, spacing or line breaks differ from old_string. Read that part of the file again (read_file with start_line=%d) and copy it exactly.", line, max(line-2, 1))
	} else {
		msg += " Read the file again (read_file) and copy the text exactly; it may have changed since you last read it."
	}
	return msg
}

var numberedLines = regexp.MustCompile(`(?m)^ *\d+\t`)

// normalizeSpace collapses each run of whitespace to one space and trims
// the ends; pos maps each byte of the result to its offset in s.
func normalizeSpace(s string) (string, []int) {
	var b strings.Builder
	pos := make([]int, 0, len(s))
	space := false
	for i, r := range s {
		if unicode.IsSpace(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			pos = append(pos, i)
			space = false
		}
		n := b.Len()
		b.WriteRune(r)
		for range b.Len() - n {
			pos = append(pos, i)
		}
	}
	return b.String(), pos
}

// editSummary says what changed and shows the first edited region.
func editSummary(path, before, after string, offsets []int, in editFileInput) string {
	lines := lineNumbers(before, offsets)
	var b strings.Builder
	if len(offsets) == 1 {
		fmt.Fprintf(&b, "edited %s: replaced 1 occurrence at line %d.\n", path, lines[0])
	} else {
		fmt.Fprintf(&b, "edited %s: replaced %d occurrences, at lines %s.\n", path, len(offsets), joinInts(lines))
	}
	// The first replacement starts at the same line before and after the edit.
	first := lines[0]
	shown := strings.Count(in.NewString, "\n") + 1
	b.WriteString(numbered(after, max(first-3, 1), first+min(shown, 30)+2))
	return b.String()
}

// numbered returns lines from..to of s (1-based, inclusive) like cat -n.
func numbered(s string, from, to int) string {
	var b strings.Builder
	for i, line := range strings.SplitAfter(s, "\n") {
		n := i + 1
		if n < from || line == "" {
			continue
		}
		if n > to {
			break
		}
		fmt.Fprintf(&b, "%6d\t%s\n", n, clip(strings.TrimRight(line, "\r\n"), ReadMaxLineBytes))
	}
	return b.String()
}

func joinInts(ns []int) string {
	parts := make([]string, 0, min(len(ns), 50))
	for _, n := range ns[:min(len(ns), 50)] {
		parts = append(parts, fmt.Sprint(n))
	}
	if len(ns) > 50 {
		parts = append(parts, fmt.Sprintf("… (%d more)", len(ns)-50))
	}
	return strings.Join(parts, ", ")
}
