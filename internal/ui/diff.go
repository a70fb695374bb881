package ui

import (
	"bufio"
	"bytes"
	"net/http"
	"strconv"
	"strings"
)

// The job page's Diff tab: the job's unified git diff, parsed here and
// rendered with html/template as a unified or a side-by-side view. The diff
// is the job's output, so every name and line in it is hostile text.

// MaxDiffBytes and MaxDiffLines cap the diff the Diff tab shows; the rest
// is cut, and the tab says so (the zip holds the whole diff as
// agentbox.diff). A MiB of one-character lines would be half a million
// rows, 90 MB of HTML the browser freezes on.
const (
	MaxDiffBytes = 1 << 20
	MaxDiffLines = 20000
)

// Diff views.
const (
	viewUnified = "unified"
	viewSplit   = "split"
)

// diffFile is one file's part of a diff.
type diffFile struct {
	Old, New string // names, "" for /dev/null
	Extended []string
	Binary   bool
	Hunks    []diffHunk
}

// Name is the name the file is shown under.
func (f diffFile) Name() string {
	switch {
	case f.New == "":
		return f.Old
	case f.Old != "" && f.Old != f.New:
		return f.Old + " → " + f.New
	}
	return f.New
}

// diffHunk is one @@ section of a file.
type diffHunk struct {
	Header string
	Lines  []diffLine
}

// diffLine is one line of a hunk: Kind is "add", "del", "ctx" or "note"
// ("\ No newline at end of file"); Old and New are its line numbers, 0
// where the side has none.
type diffLine struct {
	Kind     string
	Old, New int
	Text     string
}

// splitRow is a row of the side-by-side view: a removed line and the added
// line that replaced it, a context line on both sides, or one side alone.
type splitRow struct {
	Left, Right *diffLine
}

// diffData is what the diff fragment renders.
type diffData struct {
	View      string
	Files     []diffFile
	Truncated bool
	Bytes     int64
}

// Rows pairs a hunk's lines for the side-by-side view.
func (h diffHunk) Rows() []splitRow {
	var rows []splitRow
	for i := 0; i < len(h.Lines); {
		l := &h.Lines[i]
		if l.Kind != "del" && l.Kind != "add" {
			rows = append(rows, splitRow{l, l})
			i++
			continue
		}
		var dels, adds []*diffLine
		for ; i < len(h.Lines) && h.Lines[i].Kind == "del"; i++ {
			dels = append(dels, &h.Lines[i])
		}
		for ; i < len(h.Lines) && h.Lines[i].Kind == "add"; i++ {
			adds = append(adds, &h.Lines[i])
		}
		for k := 0; k < max(len(dels), len(adds)); k++ {
			var r splitRow
			if k < len(dels) {
				r.Left = dels[k]
			}
			if k < len(adds) {
				r.Right = adds[k]
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// parseDiff parses a unified git diff. It never fails: what it does not
// recognize is kept as a file's extended header lines.
func parseDiff(b []byte) []diffFile {
	var files []diffFile
	var f *diffFile
	var h *diffHunk
	oldN, newN := 0, 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), MaxDiffBytes+1)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "diff --git "):
			files = append(files, diffFile{})
			f, h = &files[len(files)-1], nil
			f.Old, f.New = gitNames(strings.TrimPrefix(line, "diff --git "))
		case f == nil:
			// Before the first file: nothing to show.
		case h != nil && (strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-") ||
			strings.HasPrefix(line, " ") || strings.HasPrefix(line, `\`) || line == ""):
			l := diffLine{Text: strings.TrimPrefix(line, line[:min(1, len(line))])}
			switch {
			case line == "" || line[0] == ' ':
				oldN++
				newN++
				l.Kind, l.Old, l.New = "ctx", oldN, newN
			case line[0] == '+':
				newN++
				l.Kind, l.New = "add", newN
			case line[0] == '-':
				oldN++
				l.Kind, l.Old = "del", oldN
			default:
				l.Kind, l.Text = "note", line
			}
			h.Lines = append(h.Lines, l)
		case strings.HasPrefix(line, "@@ "):
			f.Hunks = append(f.Hunks, diffHunk{Header: line})
			h = &f.Hunks[len(f.Hunks)-1]
			oldN, newN = hunkStarts(line)
		case strings.HasPrefix(line, "--- "):
			f.Old = diffName(strings.TrimPrefix(line, "--- "), "a/")
		case strings.HasPrefix(line, "+++ "):
			f.New = diffName(strings.TrimPrefix(line, "+++ "), "b/")
		case strings.HasPrefix(line, "Binary files "):
			f.Binary = true
		case strings.HasPrefix(line, "rename from "):
			f.Old = unquote(strings.TrimPrefix(line, "rename from "))
		case strings.HasPrefix(line, "rename to "):
			f.New = unquote(strings.TrimPrefix(line, "rename to "))
		default:
			f.Extended = append(f.Extended, line)
		}
	}
	return files
}

// hunkStarts reads "@@ -a,b +c,d @@": the line numbers before the first
// old and new lines.
func hunkStarts(header string) (oldN, newN int) {
	fields := strings.Fields(header)
	start := func(s, sign string) int {
		s, _, _ = strings.Cut(strings.TrimPrefix(s, sign), ",")
		n, _ := strconv.Atoi(s)
		return max(n-1, 0)
	}
	if len(fields) >= 3 {
		oldN, newN = start(fields[1], "-"), start(fields[2], "+")
	}
	return oldN, newN
}

// diffName is a ---/+++ line's name without git's prefix; "" for /dev/null.
func diffName(s, prefix string) string {
	s = unquote(strings.TrimSuffix(s, "\t"))
	if s == "/dev/null" {
		return ""
	}
	return strings.TrimPrefix(s, prefix)
}

// gitNames reads "a/X b/Y" from a diff --git line: the names of a file
// without ---/+++ lines (a mode change, a binary or an empty file). An
// unquoted name with " b/" in it is ambiguous; the halves are then taken
// to be the same name.
func gitNames(s string) (string, string) {
	if strings.HasPrefix(s, `"`) {
		if q, err := strconv.QuotedPrefix(s); err == nil {
			return strings.TrimPrefix(unquote(q), "a/"), diffName(strings.TrimSpace(s[len(q):]), "b/")
		}
	}
	if n := len(s); n%2 == 1 && s[:n/2] == "a/"+s[n/2+3:] {
		return s[2 : n/2], s[n/2+3:]
	}
	a, b, _ := strings.Cut(s, " b/")
	return strings.TrimPrefix(a, "a/"), b
}

// unquote undoes git's C-style quoting of a name with unusual bytes.
func unquote(s string) string {
	if strings.HasPrefix(s, `"`) {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
	}
	return s
}

// capWriter keeps the first n bytes written to it and counts the rest.
type capWriter struct {
	buf   bytes.Buffer
	n     int
	total int64
}

func (c *capWriter) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	if room := c.n - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// cut reports whether anything was left out, and the kept bytes, ending
// at the last whole line.
func (c *capWriter) cut() ([]byte, bool) {
	b := c.buf.Bytes()
	if c.total <= int64(c.n) {
		return b, false
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	}
	return b, true
}

// Diff serves GET /ui/jobs/{id}/diff?view=unified|split: the ended job's
// diff as HTML, for the Diff tab. A running job, or one without a diff,
// gets the service's error (409, 404), which the tab shows.
func (u *UI) Diff(w http.ResponseWriter, r *http.Request) error {
	view := r.URL.Query().Get("view")
	if view != viewSplit {
		view = viewUnified
	}
	cw := &capWriter{n: MaxDiffBytes}
	if err := u.svc.Diff(r.Context(), r.PathValue("id"), false, cw); err != nil {
		return err
	}
	b, cut := cw.cut()
	b, cut = cutLines(b, MaxDiffLines, cut)
	return u.fragment(w, "job", "diff-view", diffData{View: view, Files: parseDiff(b), Truncated: cut, Bytes: cw.total})
}
