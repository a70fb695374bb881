package render

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/agentbox/agentbox/internal/event"
)

// Live is the status line of a terminal while a program waits: a spinner,
// what it waits for and the time elapsed ("⠹ thinking · 4s · Ctrl-C to
// cancel"). It is drawn below the output, only while the output's last
// line is complete and quiet, and erased before anything else is written
// through the writers Live wraps, so the output never mixes with it. On
// anything but a terminal (or with TERM=dumb) Live draws nothing and its
// writers pass through.
type Live struct {
	w    io.Writer
	tty  bool
	hint string
	now  func() time.Time
	cols func() int // the terminal's width (0: unknown)

	mu      sync.Mutex
	label   string
	start   time.Time
	running bool
	shown   bool      // the line is on screen
	midLine bool      // the last byte written through Live was not '\n'
	quiet   time.Time // when the last write happened
	frame   int
	stop    chan struct{}
	done    chan struct{}
}

// liveTick is how often the spinner turns; liveQuiet is how long the
// output must rest before the line is drawn (so a busy stream of output is
// not interleaved with redraws).
const (
	liveTick  = 100 * time.Millisecond
	liveQuiet = 150 * time.Millisecond
)

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// NewLive returns the status line drawn on w; hint follows the elapsed
// time (for example "Ctrl-C to cancel"; "" for none).
func NewLive(w io.Writer, hint string) *Live {
	return &Live{w: w, tty: isTerminal(w), hint: hint, now: time.Now, cols: termWidth(w)}
}

// termWidth asks w's terminal for its width, when w is a file.
func termWidth(w io.Writer) func() int {
	return func() int {
		f, ok := w.(*os.File)
		if !ok {
			return 0
		}
		cols, _, err := term.GetSize(int(f.Fd()))
		if err != nil {
			return 0
		}
		return cols
	}
}

// liveLabel is a label as drawn: its first line without control
// characters (a tool's name comes from the model).
func liveLabel(label string) string { return printable(firstLine(label, 60)) }

// Writer wraps w so that writes to it erase the status line first. The
// wrapper is a terminal (for ColorOn) when w is.
func (l *Live) Writer(w io.Writer) io.Writer {
	return &liveWriter{l: l, w: w, tty: isTerminal(w)}
}

// Start shows the line with label, its clock starting now, until Stop.
func (l *Live) Start(label string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.label, l.start, l.quiet = liveLabel(label), l.now(), time.Time{}
	if !l.tty || l.running {
		return
	}
	l.running = true
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go l.spin(l.stop, l.done)
}

// Label changes what the line says is awaited; the clock goes on.
func (l *Live) Label(label string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.label = liveLabel(label)
}

// Stop erases the line and stops the spinner; it returns once the line
// is gone. Elapsed is the time since Start.
func (l *Live) Stop() (elapsed time.Duration) {
	l.mu.Lock()
	elapsed = l.now().Sub(l.start)
	running, stop, done := l.running, l.stop, l.done
	l.running = false
	l.mu.Unlock()
	if running {
		close(stop)
		<-done
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.erase()
	return elapsed
}

// spin redraws the line every tick until stop is closed.
func (l *Live) spin(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(liveTick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			l.draw()
		}
	}
}

// draw puts the line on screen if the output is at a line's start and
// has been quiet a moment.
func (l *Live) draw() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.running || l.midLine || now.Sub(l.quiet) < liveQuiet {
		return
	}
	l.frame = (l.frame + 1) % len(spinner)
	line := fmt.Sprintf("%s %s · %s", spinner[l.frame], l.label, Elapsed(now.Sub(l.start)))
	if l.hint != "" {
		line += " · " + l.hint
	}
	// A line that wrapped could not be erased: cut it to the width.
	if cols := l.cols(); cols > 1 {
		line = cutWidth(line, cols-1)
	}
	if _, err := io.WriteString(l.w, "\r\033[K"+line); err == nil {
		l.shown = true
	}
}

// erase takes the line off the screen; l.mu is held.
func (l *Live) erase() {
	if l.shown {
		_, _ = io.WriteString(l.w, "\r\033[K")
		l.shown = false
	}
}

// Elapsed is a duration the way a status line shows it: "4s", "1m05s",
// "450ms" under a second.
func Elapsed(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	default:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
}

// liveWriter erases its Live's line before each write and keeps track of
// whether the output stands at a line's start.
type liveWriter struct {
	l   *Live
	w   io.Writer
	tty bool
}

func (lw *liveWriter) Write(b []byte) (int, error) {
	l := lw.l
	l.mu.Lock()
	defer l.mu.Unlock()
	l.erase()
	n, err := lw.w.Write(b)
	if n > 0 {
		l.midLine = b[n-1] != '\n'
		l.quiet = l.now()
	}
	return n, err
}

// Terminal reports whether the wrapped writer is a terminal.
func (lw *liveWriter) Terminal() bool { return lw.tty }

// Follow sets the label from a job's event as it is shown: what the job
// waits for next.
func (l *Live) Follow(typ string, payload json.RawMessage) {
	ev, _ := event.Decode(typ, payload)
	l.Saw(ev)
}

// Saw sets the label from an event as it is emitted (Follow's, before
// it is stored).
func (l *Live) Saw(ev event.Payload) {
	switch ev := ev.(type) {
	case event.ToolCall:
		l.Label("running " + printable(firstLine(ev.Name, 40)))
	case event.ToolResult, event.Model, event.Sandbox:
		l.Label("thinking")
	case event.State:
		l.Label(printable(firstLine(string(ev.Status), 40)))
	}
}

// Ago is how long ago something was, as a listing shows it: "just now",
// "3m ago", "5h ago" (up to two days), "2d ago".
func Ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}
