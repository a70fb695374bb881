package render

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"golang.org/x/term"
)

// Sandbox bytes on a terminal: a file, a diff or a command's output that
// a sandbox wrote is printed as less -R would show it. Colour and style
// sequences (SGR, "ESC [ … m") act, but for concealed text; every other
// control character is shown in caret notation ("^[", "^G", "^M"), C1
// controls, bidirectional overrides and bytes that are not UTF-8 as
// "<U+009B>" or "<9B>". Once its ESC is shown, an escape sequence's other
// bytes are plain text, so an OSC 52 clipboard write, a title, a screen
// clear or a DCS string does nothing; a CR is shown unless a newline
// follows, so it cannot write a line over another.

// maxSGR bounds the bytes of a colour sequence held across writes; a
// longer one is shown, not acted on.
const maxSGR = 64

// ForTerminal returns the writer through which sandbox bytes go to w:
// w itself when raw is set or w is not a terminal (the bytes pass
// unchanged, so a pipe or a file gets them exactly), else a Visible.
// Close flushes what a Visible holds back; it does not close w.
func ForTerminal(w io.Writer, raw bool) io.WriteCloser {
	if raw || !onTerminal(w) {
		return nopCloser{w}
	}
	return NewVisible(w)
}

// onTerminal reports whether w is a terminal, whatever TERM says: a
// "dumb" terminal may still act on escape sequences.
func onTerminal(w io.Writer) bool {
	if t, ok := w.(interface{ Terminal() bool }); ok {
		return t.Terminal()
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// Visible writes bytes to a terminal with their controls made visible.
// Each Write is passed on before it returns (the output streams); only
// an unfinished colour sequence, UTF-8 rune or CR at the end of a write
// is held for the next. Close writes what is held and, if a colour is
// left on, a reset. A Visible is not safe for concurrent use.
type Visible struct {
	w        io.Writer
	held     []byte
	out      []byte // reused for the filtered output
	coloured bool   // a colour sequence other than a reset was passed last
}

// NewVisible returns a Visible writing to w.
func NewVisible(w io.Writer) *Visible { return &Visible{w: w} }

// Write filters p to the terminal. It reports len(p) when the terminal
// took the filtered bytes.
func (v *Visible) Write(p []byte) (int, error) {
	data := p
	if len(v.held) > 0 {
		data = append(v.held, p...)
		v.held = nil
	}
	if len(data) > 0 && safeRun(data) == len(data) {
		if _, err := v.w.Write(data); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	var rest []byte
	v.out, rest = v.filter(v.out[:0], data, false)
	v.held = append(v.held[:0], rest...)
	if _, err := v.w.Write(v.out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close writes the held bytes, shown as the end of the stream leaves
// them, and resets a colour left on.
func (v *Visible) Close() error {
	out, _ := v.filter(v.out[:0], v.held, true)
	v.held = nil
	if v.coloured {
		out = append(out, reset...)
		v.coloured = false
	}
	if len(out) == 0 {
		return nil
	}
	_, err := v.w.Write(out)
	return err
}

// filter appends data to out as the terminal should get it and returns
// the tail it could not decide yet (none when final).
func (v *Visible) filter(out, data []byte, final bool) ([]byte, []byte) {
	for i := 0; i < len(data); {
		n := safeRun(data[i:])
		out = append(out, data[i:i+n]...)
		if i += n; i == len(data) {
			break
		}
		var used int
		if out, used = v.special(out, data[i:], final); used == 0 {
			return out, data[i:]
		}
		i += used
	}
	return out, nil
}

// special appends the shown form of the control, sequence or rune that
// b starts with and returns how many bytes of b it took; 0 means b ends
// before it can be told (and final is not set).
func (v *Visible) special(out, b []byte, final bool) ([]byte, int) {
	switch c := b[0]; {
	case c == 0x1b:
		n, ok, more := sgrLen(b)
		switch {
		case more && !final:
			return out, 0
		case ok:
			v.coloured = !isReset(b[2 : n-1])
			return append(out, b[:n]...), n
		}
		return append(out, '^', '['), 1
	case c == '\r':
		switch {
		case len(b) > 1 && b[1] == '\n':
			return append(out, '\r', '\n'), 2
		case len(b) == 1 && !final:
			return out, 0
		}
		return append(out, '^', 'M'), 1
	case c < 0x80:
		return append(out, '^', c^0x40), 1
	}
	r, size := utf8.DecodeRune(b)
	switch {
	case r == utf8.RuneError && size <= 1 && !utf8.FullRune(b) && !final:
		return out, 0
	case r == utf8.RuneError && size <= 1:
		return fmt.Appendf(out, "<%02X>", b[0]), 1
	case control(r):
		return fmt.Appendf(out, "<U+%04X>", r), size
	}
	return append(out, b[:size]...), size
}

// safeRun is the length of b's leading run of bytes that pass as they
// are: printable ASCII, tab, newline and whole UTF-8 runes that are not
// controls.
func safeRun(b []byte) int {
	i := 0
	for {
		i += printableWords(b[i:])
		// The word that stopped it, a byte at a time: a newline or a tab
		// passes, and the words after it are tested whole again.
		if end := min(i+8, len(b)); i < end && plainByte[b[i]] {
			for i < end && plainByte[b[i]] {
				i++
			}
			if i == end && i < len(b) {
				continue
			}
		}
		if i == len(b) || b[i] < utf8.RuneSelf {
			return i
		}
		r, size := utf8.DecodeRune(b[i:])
		if (r == utf8.RuneError && size <= 1) || control(r) {
			return i
		}
		i += size
	}
}

// printableWords is the length of b's leading run of 8-byte words of
// printable ASCII (0x20 to 0x7e), tested a word at a time: most of a
// diff or a log is made of them.
func printableWords(b []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		below := (w - 0x20*ones) &^ w & highs // a byte under 0x20
		above := ((w + ones) | w) & highs     // a byte of 0x7f or more
		if below|above != 0 {
			break
		}
	}
	return i
}

// plainByte marks the bytes safeRun passes.
var plainByte = func() (t [256]bool) {
	for c := range utf8.RuneSelf {
		t[c] = !control(rune(c))
	}
	return t
}()

// control reports the runes that must not reach a terminal as they are:
// C0 controls but tab and newline, DEL, C1 controls and the
// bidirectional overrides. printable drops them; Visible shows them.
func control(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) || bidiControl(r)
}

// sgrLen looks at the escape sequence b starts with. ok: it is a colour
// or style sequence (SGR) that may act, n bytes long. more: b ends before
// it can be told.
func sgrLen(b []byte) (n int, ok, more bool) {
	if len(b) < 2 {
		return 0, false, true
	}
	if b[1] != '[' {
		return 0, false, false
	}
	for j := 2; j < len(b) && j < maxSGR; j++ {
		switch c := b[j]; {
		case c == 'm':
			return j + 1, allowedSGR(b[2:j]), false
		case (c < '0' || c > '9') && c != ';' && c != ':':
			return 0, false, false
		}
	}
	return 0, false, len(b) < maxSGR
}

// allowedSGR reports whether an SGR's parameters may act: all but
// conceal (8), which hides text as a CR would; an 8 that is a colour's
// index (38;5;8) or component (38;2;8;8;8) is fine.
func allowedSGR(params []byte) bool {
	fields := bytes.Split(params, []byte{';'})
	for i := 0; i < len(fields); i++ {
		n := leadingInt(fields[i])
		switch {
		case n == 8:
			return false
		case (n == 38 || n == 48 || n == 58) && i+1 < len(fields) && !bytes.Contains(fields[i], []byte{':'}):
			switch leadingInt(fields[i+1]) {
			case 5:
				i += 2
			case 2:
				i += 4
			}
		}
	}
	return true
}

// leadingInt is the number a parameter starts with (0 for none), capped
// so that a long run of digits does not overflow.
func leadingInt(f []byte) int {
	n := 0
	for _, c := range f {
		if c < '0' || c > '9' {
			break
		}
		n = min(n*10+int(c-'0'), 1<<16)
	}
	return n
}

// isReset reports whether an SGR's parameters turn every style off.
func isReset(params []byte) bool {
	return len(bytes.Trim(params, "0")) == 0
}
