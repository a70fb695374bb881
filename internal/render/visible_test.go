package render

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// visibleCases are sandbox bytes and what a terminal gets of them.
var visibleCases = []struct {
	name, in, want string
}{
	{"plain text passes", "hello\tworld\n", "hello\tworld\n"},
	{"UTF-8 passes", "héllo 世界 ✓\n", "héllo 世界 ✓\n"},
	{"colour acts", "\x1b[31mred\x1b[0m \x1b[1;38;5;208mbold\x1b[m\n", "\x1b[31mred\x1b[0m \x1b[1;38;5;208mbold\x1b[m\n"},
	{"colour 8 of 256 acts", "\x1b[38;5;8mgrey\x1b[0m", "\x1b[38;5;8mgrey\x1b[0m"},
	{"true colour acts", "\x1b[38;2;8;8;8mx\x1b[0m", "\x1b[38;2;8;8;8mx\x1b[0m"},
	{"conceal is shown", "\x1b[8mhidden\x1b[0m", "^[[8mhidden\x1b[0m"},
	{"conceal among others is shown", "\x1b[1;8m", "^[[1;8m"},
	{"OSC 52 clipboard is shown", "\x1b]52;c;cHduZWQ=\x07", "^[]52;c;cHduZWQ=^G"},
	{"title with ST is shown", "\x1b]2;pwned\x1b\\", "^[]2;pwned^[\\"},
	{"clear screen is shown", "\x1b[2J\x1b[H", "^[[2J^[[H"},
	{"private CSI is shown", "\x1b[?1049h", "^[[?1049h"},
	{"full reset is shown", "\x1bc", "^[c"},
	{"DCS is shown", "\x1bP1$r\x1b\\", "^[P1$r^[\\"},
	{"C1 CSI is shown", "\u009b2J\u009d0;t\u009c", "<U+009B>2J<U+009D>0;t<U+009C>"},
	{"a byte that is not UTF-8 is shown", "a\x9b2Jb\xff", "a<9B>2Jb<FF>"},
	{"bidi override is shown", "access\u202e\u2066 level", "access<U+202E><U+2066> level"},
	{"BEL and backspace are shown", "ding\x07ab\x08\x08XY", "ding^Gab^H^HXY"},
	{"a CR over a line is shown", "+safe\rEVIL\n", "+safe^MEVIL\n"},
	{"CRLF passes", "dos\r\nline\r\n", "dos\r\nline\r\n"},
	{"a CR at the end is shown", "tail\r", "tail^M"},
	{"DEL and NUL are shown", "a\x7fb\x00", "a^?b^@"},
	{"an unfinished sequence at the end is shown", "x\x1b[31", "x^[[31"},
	{"a lone ESC at the end is shown", "x\x1b", "x^["},
	{"a cut rune at the end is shown", "x\xe4\xb8", "x<E4><B8>"},
	{"an overlong SGR is shown", "\x1b[" + strings.Repeat("1;", 40) + "m", "^[[" + strings.Repeat("1;", 40) + "m"},
}

func TestVisible(t *testing.T) {
	for _, c := range visibleCases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			v := NewVisible(&b)
			if n, err := v.Write([]byte(c.in)); n != len(c.in) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			v.Close()
			if b.String() != c.want {
				t.Errorf("%q\n got %q\nwant %q", c.in, b.String(), c.want)
			}
		})
	}
}

// TestVisibleStreams: the output is the same however the bytes are cut
// into writes, and each write's bytes reach the terminal before the next
// but for the unfinished tail.
func TestVisibleStreams(t *testing.T) {
	var in, want strings.Builder
	for _, c := range visibleCases { // "|" ends an unfinished case's tail as the end of the bytes does
		in.WriteString(c.in + "|")
		want.WriteString(c.want + "|")
	}
	whole := filterAll(t, [][]byte{[]byte(in.String())})
	for _, size := range []int{1, 2, 3, 5, 7, 64} {
		var parts [][]byte
		for s := in.String(); s != ""; s = s[min(size, len(s)):] {
			parts = append(parts, []byte(s[:min(size, len(s))]))
		}
		if got := filterAll(t, parts); got != whole {
			t.Errorf("written %d bytes at a time:\n got %q\nwant %q", size, got, whole)
		}
	}
	if whole != want.String() {
		t.Errorf("got %q\nwant %q", whole, want.String())
	}
	var b bytes.Buffer
	v := NewVisible(&b)
	v.Write([]byte("line one\nred \x1b[3"))
	if b.String() != "line one\nred " {
		t.Errorf("after one write the terminal has %q", b.String())
	}
	v.Write([]byte("1mstill\n"))
	if b.String() != "line one\nred \x1b[31mstill\n" {
		t.Errorf("after two writes the terminal has %q", b.String())
	}
}

// filterAll writes parts through a Visible and returns what it wrote.
func filterAll(t *testing.T, parts [][]byte) string {
	t.Helper()
	var b bytes.Buffer
	v := NewVisible(&b)
	for _, p := range parts {
		if _, err := v.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestVisibleResetsALeftColour: a colour left on at the end would paint
// the shell's prompt; Close turns it off, and only then.
func TestVisibleResetsALeftColour(t *testing.T) {
	for in, want := range map[string]string{
		"\x1b[31mred":         "\x1b[31mred\x1b[0m",
		"\x1b[31mred\x1b[0m":  "\x1b[31mred\x1b[0m",
		"\x1b[31mred\x1b[m\n": "\x1b[31mred\x1b[m\n",
		"plain":               "plain",
	} {
		if got := filterAll(t, [][]byte{[]byte(in)}); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}

// TestForTerminalPassesBytesToAPipe: what is not a terminal gets every
// byte unchanged, and so does a terminal with raw set.
func TestForTerminalPassesBytesToAPipe(t *testing.T) {
	in := []byte("\x1b]52;c;eA==\x07\x1b[2J\r\x9b\u202e\x00")
	for _, tc := range []struct {
		name string
		w    io.Writer
		raw  bool
	}{{"buffer", &bytes.Buffer{}, false}, {"terminal, raw", fakeTerminal{&bytes.Buffer{}}, true}} {
		w := ForTerminal(tc.w, tc.raw)
		w.Write(in)
		w.Close()
		if got := bufferOf(tc.w).Bytes(); !bytes.Equal(got, in) {
			t.Errorf("%s: got %q", tc.name, got)
		}
	}
	w := ForTerminal(fakeTerminal{&bytes.Buffer{}}, false)
	if _, ok := w.(*Visible); !ok {
		t.Errorf("a terminal gets %T, not a Visible", w)
	}
}

// fakeTerminal is a writer that says it is a terminal, as Live's do.
type fakeTerminal struct{ *bytes.Buffer }

func (fakeTerminal) Terminal() bool { return true }

func bufferOf(w io.Writer) *bytes.Buffer {
	if f, ok := w.(fakeTerminal); ok {
		return f.Buffer
	}
	return w.(*bytes.Buffer)
}

// BenchmarkVisibleDiff filters a 64 MiB unified diff in the 32 KiB
// writes io.Copy makes: plain ASCII, and with UTF-8 on every added line
// and a colour, a title and a CR every hundred hunks.
func BenchmarkVisibleDiff(b *testing.B) {
	for _, c := range []struct {
		name         string
		added, extra string
	}{
		{"ascii", "+added line %d\n", ""},
		{"mixed", "+added line %d, é ü 世\n", "+\x1b[31mcoloured\x1b[0m and \x1b]2;title\x07 and a CR\r here\n"},
	} {
		var sb strings.Builder
		for i := 0; sb.Len() < 64<<20; i++ {
			fmt.Fprintf(&sb, "@@ -%d,3 +%d,4 @@ func f()\n context line with some ordinary code := x + y\n-removed line %d\n", i, i, i)
			fmt.Fprintf(&sb, c.added, i)
			if i%100 == 0 {
				sb.WriteString(c.extra)
			}
		}
		diff := []byte(sb.String())
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(diff)))
			for range b.N {
				v := NewVisible(io.Discard)
				for p := diff; len(p) > 0; p = p[min(32<<10, len(p)):] {
					v.Write(p[:min(32<<10, len(p))])
				}
				v.Close()
			}
		})
	}
}

// TestSafeRunStopsAtEveryControl: the word-at-a-time test stops at any
// byte that is not plain, wherever in its word it is.
func TestSafeRunStopsAtEveryControl(t *testing.T) {
	for c := range 256 {
		for pos := range 20 {
			b := []byte(strings.Repeat("x", 20))
			b[pos] = byte(c)
			want := 20
			if c >= utf8.RuneSelf || control(rune(c)) { // a lone byte over 0x7f is not UTF-8
				want = pos
			}
			if got := safeRun(b); got != want {
				t.Fatalf("byte %#x at %d: safeRun = %d, want %d", c, pos, got, want)
			}
		}
	}
}
