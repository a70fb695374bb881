// Package lineedit is the raw-mode, multi-line line editor of
// `agentbox chat`: it reads keys from a terminal, edits a message that may
// span lines (bracketed paste, Alt-Enter, a trailing backslash), keeps a
// history file, and reports Ctrl-C typed between messages so the chat can
// cancel the running turn.
//
// It owns the terminal's input while open, and its output only while
// ReadLine runs: between ReadLines the rest of the program writes freely.
package lineedit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// errClosed ends the reader of a terminal opened by OpenTerminal on Close.
var errClosed = errors.New("line editor closed")

// Config is what an Editor works with.
type Config struct {
	Prompt   string // first line, e.g. "you> "
	Continue string // later lines of a multi-line message, same display width, e.g. "   … "
	// HistoryFile keeps the history across runs ("" : in memory only).
	// One JSON string per line (so entries may hold newlines), mode 0600,
	// the last HistoryMax entries (default 1000) kept; an entry over 64 KiB
	// is not saved; a corrupt line is skipped, never fatal.
	HistoryFile string
	HistoryMax  int
	// Width is the terminal's width in columns, asked before each redraw
	// (nil: 80). OpenTerminal sets it from the terminal (term.GetSize).
	Width func() int
	// Height is the terminal's height in rows (nil: 24); a message that
	// would not fit is shown as a placeholder. OpenTerminal sets it.
	Height func() int
}

// Editor is a line editor on one terminal. ReadLine, Interrupts and Close
// may be called from different goroutines; ReadLine from one at a time.
type Editor struct {
	out  io.Writer
	cfg  Config
	hist *history

	interrupts chan struct{}
	wake       chan struct{} // a key or the end of input arrived
	closed     chan struct{}
	closeOnce  sync.Once
	restore    func() error // undoes OpenTerminal; nil for New

	mu      sync.Mutex
	queue   []key // keys read and not handled yet
	readErr error // why the reader stopped
	reading bool  // a ReadLine is running: Ctrl-C goes to it
	done    chan struct{}

	// The edit state, used by ReadLine only.
	buf     buffer
	rows    int    // the cursor's row in the edit area, as last drawn
	histPos int    // the history entry shown; len(entries): the pending one
	pending string // the text being edited before going up the history
	dirty   bool   // the buffer changed since the last redraw
}

// New is an editor reading keys from in and drawing on out; the caller
// has put the terminal in raw mode (or in tests in is a pipe). It starts
// one goroutine that reads in until it fails.
func New(in io.Reader, out io.Writer, cfg Config) (*Editor, error) {
	h, err := loadHistory(cfg.HistoryFile, cfg.HistoryMax)
	if err != nil {
		return nil, fmt.Errorf("new line editor: %w", err)
	}
	e := &Editor{
		out:        out,
		cfg:        cfg,
		hist:       h,
		interrupts: make(chan struct{}, 1),
		wake:       make(chan struct{}, 1),
		closed:     make(chan struct{}),
		done:       make(chan struct{}),
	}
	go e.readLoop(in)
	return e, nil
}

// Interrupts receives one value for each Ctrl-C typed while no ReadLine is
// running (the chat cancels the running turn); one not received when the
// next ReadLine starts is dropped. Keys other than Ctrl-C typed
// meanwhile are kept, in order, for the next ReadLine (type-ahead). The
// channel is buffered (1) and never blocks the reader: extra Ctrl-Cs
// while one is pending are dropped.
func (e *Editor) Interrupts() <-chan struct{} { return e.interrupts }

// Close restores the terminal (OpenTerminal) and saves nothing more (the
// history file is appended to at each ReadLine). Safe to call twice.
// A ReadLine running returns io.EOF.
func (e *Editor) Close() error {
	var err error
	e.closeOnce.Do(func() {
		close(e.closed)
		if e.restore != nil {
			err = e.restore()
		}
	})
	return err
}

// readLoop reads and decodes in until it fails, queueing the keys.
func (e *Editor) readLoop(in io.Reader) {
	defer close(e.done)
	var d decoder
	b := make([]byte, 4096)
	for {
		n, err := in.Read(b)
		if n > 0 {
			e.deliver(d.feed(b[:n], time.Now()))
		}
		if err != nil {
			e.mu.Lock()
			e.readErr = err
			e.mu.Unlock()
			e.signal()
			return
		}
	}
}

// deliver queues keys for ReadLine; a Ctrl-C while no ReadLine runs is
// sent on Interrupts instead.
func (e *Editor) deliver(keys []key) {
	if len(keys) == 0 {
		return
	}
	e.mu.Lock()
	for _, k := range keys {
		if k.kind == keyInterrupt && !e.reading {
			e.interrupt()
			continue
		}
		e.queue = append(e.queue, k)
	}
	e.mu.Unlock()
	e.signal()
}

func (e *Editor) interrupt() {
	select {
	case e.interrupts <- struct{}{}:
	default:
	}
}

func (e *Editor) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// next takes the next key; ok false when none is queued, then err says
// whether input ended.
func (e *Editor) next() (k key, ok bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.queue) == 0 {
		return key{}, false, e.readErr
	}
	k = e.queue[0]
	e.queue = e.queue[1:]
	return k, true, nil
}

// setReading marks a ReadLine running or not. When it starts, an
// interrupt nobody took is dropped: it belonged to a turn that has ended
// (a second Ctrl-C while it wound down, one during a command) and must
// not cancel the next. When it stops, Ctrl-Cs typed after the message
// was sent become interrupts.
func (e *Editor) setReading(on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reading = on
	if on {
		select {
		case <-e.interrupts:
		default:
		}
		return
	}
	kept := e.queue[:0]
	for _, k := range e.queue {
		if k.kind == keyInterrupt {
			e.interrupt()
			continue
		}
		kept = append(kept, k)
	}
	e.queue = kept
}

// ReadLine draws the prompt and edits one message until Enter; returns it
// (without a trailing newline) and adds it to the history (not if empty or
// equal to the previous entry). io.EOF: Ctrl-D on an empty buffer, or the
// input ended. ctx canceled: returns ctx.Err() promptly (restoring
// nothing; Close does), the cursor below the text as after Enter. After return the cursor is on a new line below the
// message (the message stays on screen as typed).
func (e *Editor) ReadLine(ctx context.Context) (string, error) {
	select {
	case <-e.closed:
		return "", io.EOF
	default:
	}
	e.setReading(true)
	defer e.setReading(false)
	e.buf = buffer{}
	e.rows = 0
	e.histPos, e.pending = len(e.hist.entries), ""
	e.redraw()
	for {
		k, ok, err := e.next()
		if !ok {
			if e.dirty {
				e.redraw()
			}
			if err != nil {
				return "", e.inputEnded(err)
			}
			if err := e.wait(ctx); err != nil {
				e.finish("", "")
				return "", err
			}
			continue
		}
		if line, done, err := e.handle(k); done {
			return line, err
		}
	}
}

// wait blocks until a key arrives, ctx ends or the editor is closed.
func (e *Editor) wait(ctx context.Context) error {
	select {
	case <-e.wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-e.closed:
		return io.EOF
	}
}

// inputEnded finishes the screen line and says why no message came.
func (e *Editor) inputEnded(err error) error {
	e.finish("", "")
	if errors.Is(err, io.EOF) || errors.Is(err, errClosed) {
		return io.EOF
	}
	return fmt.Errorf("read terminal: %w", err)
}

// submit finishes a message: it stays on screen, goes to the history, and
// the cursor goes below it.
func (e *Editor) submit() string {
	line := e.buf.String()
	e.finish("", "")
	_ = e.hist.add(line) // a history that cannot be saved must not lose the message
	return line
}

// SetHistoryFile loads the history kept in path (see Config.HistoryFile)
// in place of the current one, for an editor that goes on with another
// session's. Not while a ReadLine runs.
func (e *Editor) SetHistoryFile(path string) error {
	h, err := loadHistory(path, e.cfg.HistoryMax)
	if err != nil {
		return fmt.Errorf("line editor: %w", err)
	}
	e.hist = h
	e.cfg.HistoryFile = path
	return nil
}
