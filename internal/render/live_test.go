package render

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/llm"
)

// fakeTTY is a terminal to Live: it records what is drawn and signals
// each write.
type fakeTTY struct {
	mu     sync.Mutex
	sb     strings.Builder
	writes chan string
}

func (f *fakeTTY) Write(b []byte) (int, error) {
	f.mu.Lock()
	f.sb.Write(b)
	f.mu.Unlock()
	if f.writes != nil {
		select {
		case f.writes <- string(b):
		default:
		}
	}
	return len(b), nil
}

func (f *fakeTTY) Terminal() bool { return true }

func (f *fakeTTY) take() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sb.String()
	f.sb.Reset()
	return s
}

func TestLiveDrawsOnlyOnQuietCompleteLines(t *testing.T) {
	tty := &fakeTTY{}
	l := NewLive(tty, "Ctrl-C to cancel")
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	now := t0
	l.now = func() time.Time { return now }
	l.running, l.label, l.start = true, "thinking", t0 // as Start, without its ticker
	out := l.Writer(tty)

	now = t0.Add(4 * time.Second)
	l.draw()
	if got := tty.take(); got != "\r\033[K⠙ thinking · 4s · Ctrl-C to cancel" {
		t.Errorf("drawn %q", got)
	}
	_, _ = out.Write([]byte("partial"))
	if got := tty.take(); got != "\r\033[Kpartial" {
		t.Errorf("a write after the line: %q, want the line erased first", got)
	}
	now = now.Add(time.Minute)
	l.draw()
	if got := tty.take(); got != "" {
		t.Errorf("drawn after an incomplete line: %q", got)
	}
	_, _ = out.Write([]byte(" done\n"))
	now = now.Add(100 * time.Millisecond)
	l.Label("running bash")
	l.draw()
	if got := tty.take(); got != " done\n" {
		t.Errorf("drawn while the output was busy: %q", got)
	}
	now = now.Add(100 * time.Millisecond)
	l.draw()
	if got := tty.take(); !strings.HasPrefix(got, "\r\033[K") || !strings.Contains(got, "running bash · 1m04s") {
		t.Errorf("drawn %q", got)
	}
	if lw, ok := out.(interface{ Terminal() bool }); !ok || !lw.Terminal() {
		t.Errorf("the wrapper does not pass on that it is a terminal")
	}
}

func TestLiveStartStop(t *testing.T) {
	tty := &fakeTTY{writes: make(chan string, 100)}
	l := NewLive(tty, "")
	l.Start("thinking")
	for w := range tty.writes {
		if strings.Contains(w, "thinking · ") {
			break
		}
	}
	l.Stop()
	if got := tty.take(); !strings.HasSuffix(got, "\r\033[K") {
		t.Errorf("Stop left %q on screen", got)
	}
	// Not a terminal: nothing is drawn, writes pass through.
	var sb strings.Builder
	plain := NewLive(&sb, "")
	plain.Start("thinking")
	_, _ = plain.Writer(&sb).Write([]byte("x\n"))
	plain.Stop()
	if sb.String() != "x\n" {
		t.Errorf("on a pipe: %q", sb.String())
	}
}

func TestTurnLine(t *testing.T) {
	got := TurnLine(Turn{Steps: 3, Usage: llm.Usage{InputTokens: 2400, CacheReadTokens: 10000, OutputTokens: 1234},
		CostUSD: 0.04123, Context: 9800, Window: 200000, Elapsed: 14200 * time.Millisecond})
	if want := "─ 3 steps · 12.4k tokens in, 1.2k out · $0.0412 · context 9.8k of 200k (4%) · 14s"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	got = TurnLine(Turn{Steps: 1, Elapsed: 400 * time.Millisecond, Canceled: true})
	if want := "─ 1 step · 0 tokens in, 0 out · $0.0000 · 400ms · canceled"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// A label from a model (a tool's name) cannot drive the terminal, and a
// line of wide runes is cut to the terminal's width in columns, not runes:
// a line that wrapped could not be erased.
func TestLiveLabelIsPlainAndFits(t *testing.T) {
	tty := &fakeTTY{}
	l := NewLive(tty, "")
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return t0.Add(time.Second) }
	l.cols = func() int { return 30 }
	l.running, l.start = true, t0
	l.Label("running \x1b]52;c;aGk=\x07x\u009b2J\x1b[2A")
	l.draw()
	got := strings.TrimPrefix(tty.take(), "\r\033[K")
	if strings.ContainsAny(got, "\x1b\x07\u009b") {
		t.Errorf("the label drove the terminal: %q", got)
	}
	l.Label("running " + strings.Repeat("界", 30))
	l.draw()
	got = strings.TrimPrefix(tty.take(), "\r\033[K")
	if w := textWidth(got); w >= 30 {
		t.Errorf("drawn %q: %d columns on a terminal of 30", got, w)
	}
}
