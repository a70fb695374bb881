package ui

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path"
	"runtime"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/capped"
)

// Limits of the file viewer's highlighting. A file over them is shown
// as plain text.
const (
	// MaxHighlightBytes is the largest file highlighted.
	MaxHighlightBytes = 128 << 10
	// MaxHighlightLine is the longest line, in bytes, of a file
	// highlighted: minified code and data on one line is where lexers'
	// patterns backtrack the most.
	MaxHighlightLine = 1000
	// DefaultHighlightBudget is the wall-clock time a file's highlighting
	// may take, waiting for a turn included.
	DefaultHighlightBudget = time.Second
)

// Highlight is how the file viewer highlights. Each file is lexed in a
// child process ("Command highlight", ServeHighlight), killed when its
// budget passes or its request goes away; at most Concurrency run at
// once, and a file waits for its turn within its budget.
type Highlight struct {
	// Command is the agentbox binary. Empty: files are shown as plain
	// text.
	Command string
	// Budget is the wall-clock time a file may take; 0 means
	// DefaultHighlightBudget.
	Budget time.Duration
	// Concurrency is how many files are lexed at once; 0 means half the
	// host's CPUs, at least one.
	Concurrency int
}

// highlighter runs the viewer's child processes.
type highlighter struct {
	cfg   Highlight
	log   *slog.Logger
	slots chan struct{} // a token per running child
	// started, if set, is called with each child's process ID (tests).
	started func(pid int)
}

// newHighlighter applies cfg's defaults.
func newHighlighter(cfg Highlight, log *slog.Logger) *highlighter {
	cfg.Budget = cmp.Or(cfg.Budget, DefaultHighlightBudget)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, max(1, runtime.GOMAXPROCS(0)/2))
	return &highlighter{cfg: cfg, log: log, slots: make(chan struct{}, cfg.Concurrency)}
}

// highlighted is a file's lines as the viewer shows them: highlighted in
// a language, or plain text and why.
type highlighted struct {
	Lines    []viewLine
	Language string
	Plain    string // why the file is not highlighted; "" if it is
}

// highlight lexes text, named name, within the budget; a file the
// limits leave out, or that runs out of time, comes back as plain text.
func (h *highlighter) highlight(ctx context.Context, name, text string) highlighted {
	if why := h.unfit(text); why != "" {
		return plain(text, why)
	}
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Budget)
	defer cancel()
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	case <-ctx.Done():
		return plain(text, "the server was busy highlighting other files")
	}
	res, err := h.run(ctx, name, text)
	if err == nil {
		return highlighted{Lines: viewLines(res.Lines), Language: res.Language}
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return plain(text, fmt.Sprintf("highlighting it took more than %v", h.cfg.Budget))
	case ctx.Err() != nil:
		return plain(text, "the request was canceled")
	}
	h.log.Warn("ui: highlight", "path", name, "err", err)
	return plain(text, "the highlighter failed")
}

// unfit says why text is not to be highlighted at all, or "".
func (h *highlighter) unfit(text string) string {
	switch {
	case h.cfg.Command == "":
		return "highlighting is off"
	case len(text) > MaxHighlightBytes:
		return fmt.Sprintf("it is over %d KiB", MaxHighlightBytes>>10)
	case longestLine(text) > MaxHighlightLine:
		return fmt.Sprintf("a line is over %d bytes", MaxHighlightLine)
	}
	return ""
}

// run lexes text in a child process, killed when ctx ends. The child
// gets no environment of the server's, and one CPU.
func (h *highlighter) run(ctx context.Context, name, text string) (highlightResult, error) {
	var res highlightResult
	budget := time.Until(deadlineOf(ctx))
	req, err := json.Marshal(highlightRequest{Name: path.Base(name), Text: text, Budget: budget})
	if err != nil {
		return res, fmt.Errorf("highlight request: %w", err)
	}
	// At most a token a byte, each as ["class","\u003c"].
	out := &capped.Buffer{Max: 24*len(text) + 64<<10}
	cmd := exec.CommandContext(ctx, h.cfg.Command, "highlight")
	cmd.Env = []string{"GOMAXPROCS=1"}
	stderr := &capped.Buffer{}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(req), out, stderr
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("start highlighter: %w", err)
	}
	if h.started != nil {
		h.started(cmd.Process.Pid)
	}
	if err := cmd.Wait(); err != nil {
		return res, fmt.Errorf("highlighter: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal([]byte(out.String()), &res); err != nil {
		return res, fmt.Errorf("highlighter's answer: %w", err)
	}
	return res, nil
}

// deadlineOf is ctx's deadline (highlight always sets one).
func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// viewLines numbers the child's lines.
func viewLines(lines [][][2]string) []viewLine {
	out := make([]viewLine, len(lines))
	for i, l := range lines {
		out[i] = viewLine{N: i + 1, Tokens: make([]token, len(l))}
		for j, t := range l {
			out[i].Tokens[j] = token{Class: t[0], Text: t[1]}
		}
	}
	return out
}

// plain is text as unclassed lines, each with its newline, as chroma
// splits them.
func plain(text, why string) highlighted {
	h := highlighted{Plain: why}
	for n := 1; text != ""; n++ {
		line := text
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			line = text[:i+1]
		}
		text = text[len(line):]
		h.Lines = append(h.Lines, viewLine{N: n, Tokens: []token{{Text: line}}})
	}
	return h
}

// longestLine is the length in bytes of text's longest line.
func longestLine(text string) int {
	longest := 0
	for text != "" {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			i = len(text)
		}
		longest = max(longest, i)
		text = text[min(i+1, len(text)):]
	}
	return longest
}
