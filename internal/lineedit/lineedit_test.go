package lineedit

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

// harness is an Editor over a pipe, its output kept in a buffer.
type harness struct {
	t   *testing.T
	e   *Editor
	in  *io.PipeWriter
	out *testenv.Buffer
	cfg Config
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	if cfg.Prompt == "" {
		cfg.Prompt, cfg.Continue = "you> ", "   … "
	}
	pr, pw := io.Pipe()
	out := &testenv.Buffer{}
	e, err := New(pr, out, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pw.Close()
		e.Close()
	})
	return &harness{t: t, e: e, in: pw, out: out, cfg: cfg}
}

type result struct {
	line string
	err  error
}

// start runs ReadLine in the background.
func (h *harness) start(ctx context.Context) <-chan result {
	ch := make(chan result, 1)
	go func() {
		line, err := h.e.ReadLine(ctx)
		ch <- result{line, err}
	}()
	// Keys typed before ReadLine runs are type-ahead, a Ctrl-C among them
	// an interrupt: the tests type into a running ReadLine.
	deadline := time.Now().Add(10 * time.Second)
	for !h.reading() && len(ch) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	return ch
}

func (h *harness) queued() int {
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	return len(h.e.queue)
}

func (h *harness) reading() bool {
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	return h.e.reading
}

// write sends each chunk as a read of its own.
func (h *harness) write(chunks ...string) {
	h.t.Helper()
	for _, c := range chunks {
		if _, err := io.WriteString(h.in, c); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *harness) wait(ch <-chan result) result {
	h.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		h.t.Fatal("ReadLine did not return")
		return result{}
	}
}

// readLine types the chunks during a ReadLine and returns its message.
func (h *harness) readLine(chunks ...string) string {
	h.t.Helper()
	ch := h.start(context.Background())
	h.write(chunks...)
	r := h.wait(ch)
	if r.err != nil {
		h.t.Fatalf("ReadLine: %v", r.err)
	}
	return r.line
}

// awaitOutput waits until s has been drawn.
func (h *harness) awaitOutput(s string) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(h.out.String(), s) {
		if time.Now().After(deadline) {
			h.t.Fatalf("%q never drawn; output %q", s, h.out.String())
		}
		time.Sleep(time.Millisecond)
	}
}

// screen is what the terminal shows after the output so far.
func (h *harness) screen(width int) *vt {
	m := newVT(h.t, width)
	m.apply(h.out.String())
	return m
}

const (
	left  = "\x1b[D"
	right = "\x1b[C"
	up    = "\x1b[A"
	down  = "\x1b[B"
	home  = "\x1b[H"
	end   = "\x1b[F"
)

func TestKeys(t *testing.T) {
	tests := []struct {
		name  string
		input []string
		want  string
	}{
		{"plain", []string{"hello\r"}, "hello"},
		{"LF is Enter", []string{"hello\n"}, "hello"},
		{"utf8", []string{"héllo wörld ✓ 漢字\r"}, "héllo wörld ✓ 漢字"},
		{"utf8 split across reads", []string{"\xc3", "\xa9\r"}, "é"},
		{"invalid utf8 dropped", []string{"a\xffb\xc3(\r"}, "ab("},
		{"tab", []string{"a\tb\r"}, "a\tb"},
		{"left right", []string{"abc" + left + left + "X" + right + "Y\r"}, "aXbYc"},
		{"ss3 arrows", []string{"abc\x1bOD\x1bODX\x1bOCY\r"}, "aXbYc"},
		{"ctrl-b ctrl-f", []string{"abc\x02\x02X\x06Y\r"}, "aXbYc"},
		{"home end csi", []string{"bc" + home + "a" + end + "d\r"}, "abcd"},
		{"home end tilde", []string{"bc\x1b[1~a\x1b[4~d\r"}, "abcd"},
		{"home end 7 8", []string{"bc\x1b[7~a\x1b[8~d\r"}, "abcd"},
		{"home end ss3", []string{"bc\x1bOHa\x1bOFd\r"}, "abcd"},
		{"ctrl-a ctrl-e", []string{"bc\x01a\x05d\r"}, "abcd"},
		{"home in line 2", []string{"ab\x1b\rcd\x01X\r"}, "ab\nXcd"},
		{"end in line 1", []string{"ab\x1b\rcd" + up + "\x01\x05X\r"}, "abX\ncd"},
		{"backspace", []string{"abc\x7f\x7fd\r"}, "ad"},
		{"ctrl-h", []string{"abc\x08d\r"}, "abd"},
		{"backspace joins lines", []string{"a\x1b\r\x7fb\r"}, "ab"},
		{"delete", []string{"abc" + home + "\x1b[3~\r"}, "bc"},
		{"ctrl-d deletes", []string{"abc" + home + "\x04\r"}, "bc"},
		{"ctrl-d at end", []string{"abc\x04\r"}, "abc"},
		{"alt-b", []string{"one two\x1bbX\r"}, "one Xtwo"},
		{"alt-b alt-f", []string{"one two\x1bb\x1bb\x1bfX\r"}, "oneX two"},
		{"ctrl-left ctrl-right", []string{"one two\x1b[1;5D\x1b[1;5D\x1b[1;5CX\r"}, "oneX two"},
		{"ctrl-w", []string{"one two  \x17\r"}, "one "},
		{"alt-backspace", []string{"one two\x1b\x7f\r"}, "one "},
		{"ctrl-u", []string{"one two" + left + left + "\x15\r"}, "wo"},
		{"ctrl-u in line 2", []string{"a\x1b\rbc\x15\r"}, "a\n"},
		{"ctrl-k", []string{"one two" + home + right + "\x0b\r"}, "o"},
		{"ctrl-k in line 1", []string{"ab\x1b\rcd" + up + home + right + "\x0b\r"}, "a\ncd"},
		{"backslash continues", []string{"a\\\rb\r"}, "a\nb"},
		{"double backslash submits", []string{"a\\\\\r"}, "a\\\\"},
		{"triple backslash continues", []string{"a\\\\\\\rb\r"}, "a\\\\\nb"},
		{"alt-enter CR", []string{"a\x1b\rb\r"}, "a\nb"},
		{"alt-enter LF", []string{"a\x1b\nb\r"}, "a\nb"},
		{"up within buffer", []string{"ab\x1b\rcd" + up + "X\r"}, "abX\ncd"},
		{"up keeps column", []string{"abc\x1b\rde" + left + up + "X\r"}, "aXbc\nde"},
		{"down within buffer", []string{"abc\x1b\rd" + up + "\x01" + down + "X\r"}, "abc\nXd"},
		{"unknown csi", []string{"a\x1b[99;99Zb\x1b[201~c\r"}, "abc"},
		{"unknown csi split", []string{"a\x1b", "[", "12;3", "4Zb\r"}, "ab"},
		{"arrow split", []string{"ab\x1b", "[", "DX\r"}, "aXb"},
		{"unknown ss3", []string{"a\x1bOzb\r"}, "ab"},
		{"unknown alt key", []string{"a\x1bxb\r"}, "ab"},
		{"other controls dropped", []string{"a\x07\x00\x1cb\r"}, "ab"},
		{"empty", []string{"\r"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			if got := h.readLine(tt.input...); got != tt.want {
				t.Errorf("message %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCRLFIsOneEnter(t *testing.T) {
	h := newHarness(t, Config{})
	if got := h.readLine("ab\r\n"); got != "ab" {
		t.Fatalf("first %q", got)
	}
	if got := h.readLine("cd\r"); got != "cd" {
		t.Errorf("second %q, want cd", got)
	}
}

func TestLoneEscapeTimesOut(t *testing.T) {
	h := newHarness(t, Config{})
	ch := h.start(context.Background())
	h.write("a\x1b")
	time.Sleep(2 * escTimeout) // what is tested is the time passing
	h.write("b\r")
	if r := h.wait(ch); r.line != "ab" {
		t.Errorf("message %q, want ab (a lone ESC is ignored)", r.line)
	}
}

func TestPaste(t *testing.T) {
	tests := []struct {
		name  string
		input []string
		want  string
	}{
		{"three lines", []string{"\x1b[200~a\nb\nc\x1b[201~\r"}, "a\nb\nc"},
		{"trailing newline does not submit", []string{"\x1b[200~a\nb\n\x1b[201~", "x\r"}, "a\nbx"},
		{"only one trailing newline dropped", []string{"\x1b[200~a\n\n\x1b[201~\r"}, "a\n"},
		{"CRLF and CR", []string{"\x1b[200~a\r\nb\rc\x1b[201~\r"}, "a\nb\nc"},
		{"controls dropped", []string{"\x1b[200~a\x07\x1b[31mb\tc\x1b[201~\r"}, "a[31mb\tc"},
		{"at the cursor", []string{"ad" + left + "\x1b[200~b\nc\x1b[201~\r"}, "ab\ncd"},
		{"pasted backslash", []string{"\x1b[200~a\\\r\x1b[201~\rb\r"}, "a\nb"},
		{"markers split", []string{"x\x1b[20", "0~ab", "c\x1b[2", "01", "~y\r"}, "xabcy"},
		{"marker split at ESC", []string{"\x1b", "[200~ab\x1b", "[201~\r"}, "ab"},
		{"keys after end in same read", []string{"\x1b[200~ab\x1b[201~c" + left + "X\r"}, "abXc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			if got := h.readLine(tt.input...); got != tt.want {
				t.Errorf("message %q, want %q", got, tt.want)
			}
		})
	}
}

func pasted(lines int) string {
	var ls []string
	for i := range lines {
		ls = append(ls, "line "+string(rune('a'+i)))
	}
	return strings.Join(ls, "\n")
}

func TestLongPastePlaceholder(t *testing.T) {
	text := pasted(12)
	h := newHarness(t, Config{})
	ch := h.start(context.Background())
	h.write("see \x1b[200~" + text + "\n\x1b[201~!" + left)
	h.write("\r")
	if r := h.wait(ch); r.line != "see "+text+"!" {
		t.Errorf("message %q", r.line)
	}
	if got, want := h.screen(80).lines(), []string{"you> see [pasted 12 lines]!"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("screen %q, want %q", got, want)
	}

	if got := h.readLine("\x1b[200~"+pasted(11)+"\x1b[201~", "\x7fok\r"); got != "ok" {
		t.Errorf("backspace after a placeholder: %q, want ok", got)
	}
	if got := h.readLine("\x1b[200~"+pasted(10)+"\x1b[201~", "\x7f\r"); got != pasted(10)[:len(pasted(10))-1] {
		t.Errorf("a 10-line paste is text: %q", got)
	}
}

func TestExpandPlaceholder(t *testing.T) {
	text := pasted(11)
	h := newHarness(t, Config{})
	if got := h.readLine("\x1b[200~"+text+"\x1b[201~", "\x0f\x7f\r"); got != text[:len(text)-1] {
		t.Errorf("Ctrl-O then backspace: %q", got)
	}
	lines := h.screen(80).lines()
	if len(lines) != 11 || lines[0] != "you> line a" || lines[10] != "   … line" {
		t.Errorf("expanded screen %q", lines)
	}
}

func TestPasteOverLimitIsCut(t *testing.T) {
	big := strings.Repeat("x", pasteMax+1000)
	h := newHarness(t, Config{})
	ch := h.start(context.Background())
	h.write("\x1b[200~")
	for i := 0; i < len(big); i += 64 << 10 {
		h.write(big[i:min(i+64<<10, len(big))])
	}
	h.write("\x1b[201~\r")
	r := h.wait(ch)
	if len(r.line) != pasteMax {
		t.Errorf("message of %d bytes, want %d", len(r.line), pasteMax)
	}
	if !strings.Contains(h.out.String(), pasteCutNote) {
		t.Error("no note that the paste was cut")
	}
}

func TestInterrupt(t *testing.T) {
	t.Run("clears the buffer", func(t *testing.T) {
		h := newHarness(t, Config{})
		if got := h.readLine("abc\x03", "d\r"); got != "d" {
			t.Errorf("message %q, want d", got)
		}
		want := []string{"you> abc^C", "you> d"}
		if got := h.screen(80).lines(); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("screen %q, want %q", got, want)
		}
	})
	t.Run("hint on an empty buffer", func(t *testing.T) {
		h := newHarness(t, Config{})
		if got := h.readLine("\x03", "d\r"); got != "d" {
			t.Errorf("message %q, want d", got)
		}
		want := []string{"you>", quitHint, "you> d"}
		if got := h.screen(80).lines(); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("screen %q, want %q", got, want)
		}
		if strings.Contains(h.out.String(), "\x1b[2m") || strings.Contains(h.out.String(), "m(Ctrl") {
			t.Error("the hint uses SGR")
		}
	})
}

func waitInterrupt(t *testing.T, e *Editor) {
	t.Helper()
	select {
	case <-e.Interrupts():
	case <-time.After(10 * time.Second):
		t.Fatal("no interrupt")
	}
}

func TestInterruptsBetweenReadLines(t *testing.T) {
	h := newHarness(t, Config{})
	h.write("\x03")
	waitInterrupt(t, h.e)

	// Type-ahead around a Ctrl-C is kept for the next ReadLine.
	h.write("hel\x03lo\r")
	waitInterrupt(t, h.e)
	if got := h.readLine(); got != "hello" {
		t.Errorf("type-ahead %q, want hello", got)
	}

	// Extra Ctrl-Cs while one is pending are dropped, never blocking.
	h.write("\x03\x03\x03x\r")
	deadline := time.Now().Add(10 * time.Second)
	for h.queued() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := len(h.e.Interrupts()); n != 1 {
		t.Errorf("%d interrupts pending, want 1", n)
	}
	waitInterrupt(t, h.e)
	if got := h.readLine(); got != "x" {
		t.Errorf("after interrupts %q, want x", got)
	}
}

func TestInterruptRightAfterEnter(t *testing.T) {
	h := newHarness(t, Config{})
	if got := h.readLine("a\r\x03"); got != "a" {
		t.Fatalf("message %q", got)
	}
	waitInterrupt(t, h.e)
	if got := h.readLine("b\r"); got != "b" {
		t.Errorf("next message %q, want b", got)
	}
}

func TestEOF(t *testing.T) {
	h := newHarness(t, Config{})
	ch := h.start(context.Background())
	h.write("\x04")
	if r := h.wait(ch); !errors.Is(r.err, io.EOF) {
		t.Errorf("Ctrl-D on an empty buffer: %v, want io.EOF", r.err)
	}

	h.write("last\r")
	h.in.Close()
	if got := h.readLine(); got != "last" {
		t.Errorf("keys before the end: %q", got)
	}
	if r := h.wait(h.start(context.Background())); !errors.Is(r.err, io.EOF) {
		t.Errorf("input ended: %v, want io.EOF", r.err)
	}
}

func TestCancel(t *testing.T) {
	h := newHarness(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	ch := h.start(ctx)
	h.write("abc")
	h.awaitOutput("abc")
	cancel()
	if r := h.wait(ch); !errors.Is(r.err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", r.err)
	}
	// What the program says next starts on a line of its own.
	if !strings.HasSuffix(h.out.String(), "\r\n") {
		t.Errorf("the cursor stayed on the edit area: %q", h.out.String())
	}
	if got := h.readLine("d\r"); got != "d" {
		t.Errorf("after cancel %q, want d", got)
	}
}

func TestCloseEndsReadLine(t *testing.T) {
	h := newHarness(t, Config{})
	ch := h.start(context.Background())
	h.e.Close()
	if r := h.wait(ch); !errors.Is(r.err, io.EOF) {
		t.Errorf("err %v, want io.EOF", r.err)
	}
	if err := h.e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestTallTextStaysAPlaceholder: text taller than the screen cannot be
// redrawn in place, so a paste, a recalled message and Ctrl-O keep it
// behind a placeholder.
func TestTallTextStaysAPlaceholder(t *testing.T) {
	long := strings.Repeat("0123456789", 300) // 3,000 columns: 38 rows of 80
	h := newHarness(t, Config{Height: func() int { return 24 }})
	if got := h.readLine("\x1b[200~" + long + "\x1b[201~\r"); got != long {
		t.Errorf("a long one-line paste came back as %d bytes", len(got))
	}
	if got := h.screen(80).lines(); len(got) != 1 || got[0] != "you> [pasted 3000 characters]" {
		t.Errorf("screen %q", got)
	}
	// Recalled: still one row.
	ch := h.start(context.Background())
	h.write(up)
	h.awaitOutput("\x1b[J")
	h.write("\r")
	if r := h.wait(ch); r.line != long {
		t.Errorf("recalled %d bytes", len(r.line))
	}
	if got := h.screen(80).lines(); len(got) != 2 || got[1] != "you> [pasted 3000 characters]" {
		t.Errorf("screen after the recall %q", got)
	}
	// Ctrl-O on a 30-line paste on a 24-row screen says why it stays folded.
	text := strings.TrimSuffix(strings.Repeat("x\n", 30), "\n")
	if got := h.readLine("\x1b[200~" + text + "\x1b[201~\x0f\r"); got != text {
		t.Errorf("message %q", got)
	}
	if !strings.Contains(h.screen(80).screen(), tooTallNote) {
		t.Errorf("no note on Ctrl-O:\n%s", h.screen(80).screen())
	}
	// On a taller screen it unfolds.
	tall := newHarness(t, Config{Height: func() int { return 100 }})
	if got := tall.readLine("\x1b[200~" + text + "\x1b[201~\x0f\x7f\r"); got != text[:len(text)-1] {
		t.Errorf("Ctrl-O on a tall screen then backspace: %q", got)
	}
}

// A Ctrl-C nobody took before the next message (a second one while a
// turn winds down, one during a command) must not cancel the next turn.
func TestStaleInterruptDroppedAtReadLine(t *testing.T) {
	h := newHarness(t, Config{})
	h.write("\x03")
	deadline := time.Now().Add(10 * time.Second)
	for len(h.e.Interrupts()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := h.readLine("x\r"); got != "x" {
		t.Fatalf("message %q, want x", got)
	}
	if n := len(h.e.Interrupts()); n != 0 {
		t.Errorf("%d interrupts pending after a message, want 0: the next turn would be canceled at once", n)
	}
}

// TestStuckPasteEndsOnCtrlC: a paste whose end marker never comes would
// swallow every key; a Ctrl-C after it has been quiet a while ends it.
func TestStuckPasteEndsOnCtrlC(t *testing.T) {
	var d decoder
	t0 := time.Now()
	if keys := d.feed([]byte("\x1b[200~half a paste"), t0); len(keys) != 0 {
		t.Fatalf("keys in an open paste: %+v", keys)
	}
	if keys := d.feed([]byte("\x03"), t0.Add(pasteStuck/2)); len(keys) != 0 {
		t.Fatalf("a Ctrl-C soon after is pasted text, got keys %+v", keys)
	}
	keys := d.feed([]byte("\x03"), t0.Add(pasteStuck/2+pasteStuck+time.Millisecond))
	if len(keys) != 2 || keys[0].kind != keyPaste || keys[0].text != "half a paste" || keys[1].kind != keyInterrupt {
		t.Fatalf("after a quiet second: %+v, want the paste so far then Ctrl-C", keys)
	}
	if keys := d.feed([]byte("x"), t0.Add(3*pasteStuck)); len(keys) != 1 || keys[0].r != 'x' {
		t.Errorf("after the stuck paste: %+v", keys)
	}
}
