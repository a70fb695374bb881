package chat

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/agentbox/agentbox/internal/lineedit"
)

// Lines is the Input of a terminal in its normal (cooked) mode, or of a
// pipe: a message is a line, a bracketed paste (one message however many
// lines it has), or lines joined by a trailing backslash. On a terminal it
// prompts, and asks the terminal to mark pastes until Close.
type Lines struct {
	r        *bufio.Reader
	prompt   io.Writer
	terminal bool
	marks    bool          // bracketed paste was turned on
	pending  chan lineRead // a read a canceled Next left running
}

// lineRead is what one read of a message gave.
type lineRead struct {
	msg string
	err error
}

// The markers a terminal puts around a paste in bracketed-paste mode.
const (
	pasteStart = "\x1b[200~"
	pasteEnd   = "\x1b[201~"
)

// NewLines reads messages from in, prompting on prompt when in is a
// terminal. It asks for marked pastes only when prompt is that terminal
// too and TERM is not "dumb": escape codes go nowhere else.
func NewLines(in io.Reader, prompt io.Writer) *Lines {
	l := &Lines{r: bufio.NewReader(in), prompt: prompt}
	if isTTY(in) {
		l.terminal = true
		l.marks = isTTY(prompt) && os.Getenv("TERM") != "dumb"
	}
	if l.marks {
		fmt.Fprint(prompt, "\x1b[?2004h") // ask the terminal to mark pastes
	}
	return l
}

// isTTY reports whether v is a file open on a terminal.
func isTTY(v any) bool {
	f, ok := v.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Close turns bracketed paste off again.
func (l *Lines) Close() {
	if l.marks {
		fmt.Fprint(l.prompt, "\x1b[?2004l")
	}
}

// Next returns the next message; io.EOF once the input ends. When ctx
// ends first (Ctrl-C at a cooked terminal is a SIGINT) it returns
// ctx.Err() at once; the read goes on, and its message is the next
// Next's.
func (l *Lines) Next(ctx context.Context) (string, error) {
	if l.pending == nil {
		if l.terminal {
			fmt.Fprint(l.prompt, "\nyou> ")
		}
		ch := make(chan lineRead, 1)
		go func() {
			msg, err := l.read()
			ch <- lineRead{msg, err}
		}()
		l.pending = ch
	}
	select {
	case r := <-l.pending:
		l.pending = nil
		return r.msg, r.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// read reads one message.
func (l *Lines) read() (string, error) {
	var msg strings.Builder
	for {
		line, err := l.r.ReadString('\n')
		if strings.Contains(line, pasteStart) {
			line, err = l.paste(line, err)
		}
		if err != nil && line == "" {
			if msg.Len() > 0 {
				return msg.String(), nil
			}
			return "", err
		}
		trimmed := strings.TrimRight(line, "\r\n")
		if strings.HasSuffix(trimmed, "\\") && !strings.HasSuffix(trimmed, "\\\\") {
			msg.WriteString(strings.TrimSuffix(trimmed, "\\") + "\n")
			continue
		}
		msg.WriteString(trimmed)
		return msg.String(), nil
	}
}

// paste reads up to the end of a bracketed paste and returns it as one line.
func (l *Lines) paste(first string, err error) (string, error) {
	var sb strings.Builder
	sb.WriteString(strings.Replace(first, pasteStart, "", 1))
	for err == nil && !strings.Contains(sb.String(), pasteEnd) {
		var more string
		more, err = l.r.ReadString('\n')
		sb.WriteString(more)
	}
	text := strings.Replace(sb.String(), pasteEnd, "", 1)
	return strings.TrimRight(text, "\r\n") + "\n", err
}

// Editor is the Input of a person at a terminal: a line editor in raw
// mode (lineedit), whose Ctrl-C cancels a running turn and whose history
// is the session's.
type Editor struct {
	e *lineedit.Editor
}

// The prompts of the editor; the second starts a message's later lines.
const (
	prompt         = "you> "
	promptContinue = "   … "
)

// Next reads a message from the editor.
func (e *Editor) Next(ctx context.Context) (string, error) { return e.e.ReadLine(ctx) }

// Interrupts are the Ctrl-Cs typed while a turn runs.
func (e *Editor) Interrupts() <-chan struct{} { return e.e.Interrupts() }

// UseHistory loads (and from now on appends to) the history in path.
func (e *Editor) UseHistory(path string) error { return e.e.SetHistoryFile(path) }

// Close gives the terminal back as it was.
func (e *Editor) Close() error { return e.e.Close() }

// OpenInput is the Input for in: the line editor when in and screen are
// terminals (and TERM is not "dumb"), else plain lines (pipes, scripts).
// Close it when done.
func OpenInput(in io.Reader, screen io.Writer) (Input, io.Closer, error) {
	if isTTY(in) && isTTY(screen) && os.Getenv("TERM") != "dumb" {
		e, err := lineedit.OpenTerminal(in.(*os.File), screen.(*os.File), lineedit.Config{Prompt: prompt, Continue: promptContinue})
		if err != nil {
			return nil, nil, err
		}
		return &Editor{e: e}, e, nil
	}
	l := NewLines(in, screen)
	return l, closer(l.Close), nil
}

// closer is a func as an io.Closer.
type closer func()

func (c closer) Close() error { c(); return nil }
