package ui

import (
	"strconv"
	"strings"
)

// Span is a run of terminal output in one style. Class is a space
// separated list of CSS classes from a fixed set (ansi-bold, ansi-fg-N,
// ansi-bg-N with N in 0..15), never text from the output; Text is the
// output itself, which the template escapes.
type Span struct {
	Class string
	Text  string
}

// ansiStyle is the SGR state: colours 0..15, -1 for the default.
type ansiStyle struct {
	fg, bg int
	bold   bool
}

func (s ansiStyle) class() string {
	var c []string
	if s.bold {
		c = append(c, "ansi-bold")
	}
	if s.fg >= 0 {
		c = append(c, "ansi-fg-"+strconv.Itoa(s.fg))
	}
	if s.bg >= 0 {
		c = append(c, "ansi-bg-"+strconv.Itoa(s.bg))
	}
	return strings.Join(c, " ")
}

// ANSI splits terminal output into styled spans: SGR colours (the 16
// basic and bright ones) and bold become classes; every other escape
// sequence (cursor moves, OSC titles and links, 256-colour and RGB
// colours, broken or cut-off sequences) and the other control characters
// but tab and newline are dropped. A carriage return not before a newline
// becomes a newline, so progress lines stay readable.
func ANSI(s string) []Span {
	var a ansiSpans
	a.cur = ansiStyle{fg: -1, bg: -1}
	a.curClass = a.cur.class()
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == 0x1b:
			params, final, n := escape(s[i:])
			i += n
			if final == 'm' {
				a.cur = sgr(a.cur, params)
				a.curClass = a.cur.class()
			}
		case c == '\r':
			if i+1 >= len(s) || s[i+1] != '\n' {
				a.write('\n')
			}
			i++
		case c == '\n' || c == '\t' || c >= 0x20 && c != 0x7f:
			a.write(c)
			i++
		default:
			i++ // other C0 controls and DEL
		}
	}
	a.flush()
	return a.out
}

// ansiSpans gathers ANSI's spans: the text of the current class is
// built up until text of another class comes, so that styles switched
// back and forth with nothing between (1 MiB of "\x1b[mA") cost one
// span, not a copy of it per switch.
type ansiSpans struct {
	out       []Span
	cur       ansiStyle
	curClass  string // cur.class()
	text      strings.Builder
	textClass string // the class of text
}

func (a *ansiSpans) write(c byte) {
	if a.text.Len() > 0 && a.textClass != a.curClass {
		a.flush()
	}
	a.textClass = a.curClass
	a.text.WriteByte(c)
}

func (a *ansiSpans) flush() {
	if a.text.Len() > 0 {
		a.out = append(a.out, Span{Class: a.textClass, Text: a.text.String()})
		a.text.Reset()
	}
}

// escape reads the escape sequence at the start of s (s[0] is ESC) and
// returns its CSI parameters and final byte (0 for anything but a
// complete CSI sequence) and its length.
func escape(s string) (params string, final byte, n int) {
	if len(s) < 2 {
		return "", 0, len(s)
	}
	switch s[1] {
	case '[': // CSI: parameters and intermediates 0x20-0x3f, final 0x40-0x7e
		for j := 2; j < len(s); j++ {
			switch b := s[j]; {
			case b >= 0x40 && b <= 0x7e:
				return s[2:j], b, j + 1
			case b < 0x20 || b > 0x7e:
				return "", 0, j // broken: drop what came, keep the rest
			}
		}
		return "", 0, len(s)
	case ']', 'P', '_', '^': // OSC, DCS, APC, PM: up to BEL or ST (ESC \)
		for j := 2; j < len(s); j++ {
			if s[j] == 0x07 {
				return "", 0, j + 1
			}
			if s[j] == 0x1b {
				if j+1 < len(s) && s[j+1] == '\\' {
					return "", 0, j + 2
				}
				return "", 0, j
			}
		}
		return "", 0, len(s)
	default: // ESC, intermediates 0x20-0x2f, a final byte (ESC c, ESC ( B)
		j := 1
		for j < len(s) && s[j] >= 0x20 && s[j] <= 0x2f {
			j++
		}
		return "", 0, min(j+1, len(s))
	}
}

// sgr applies an SGR sequence's parameters to st.
func sgr(st ansiStyle, params string) ansiStyle {
	if params == "" {
		return ansiStyle{fg: -1, bg: -1}
	}
	ps := strings.FieldsFunc(params, func(r rune) bool { return r == ';' || r == ':' })
	for k := 0; k < len(ps); k++ {
		p, err := strconv.Atoi(ps[k])
		if err != nil {
			continue
		}
		switch {
		case p == 0:
			st = ansiStyle{fg: -1, bg: -1}
		case p == 1:
			st.bold = true
		case p == 22:
			st.bold = false
		case p >= 30 && p <= 37:
			st.fg = p - 30
		case p >= 90 && p <= 97:
			st.fg = p - 90 + 8
		case p == 39:
			st.fg = -1
		case p >= 40 && p <= 47:
			st.bg = p - 40
		case p >= 100 && p <= 107:
			st.bg = p - 100 + 8
		case p == 49:
			st.bg = -1
		case p == 38 || p == 48: // extended colours: skip their arguments
			if k+1 < len(ps) && ps[k+1] == "5" {
				k += 2
			} else if k+1 < len(ps) && ps[k+1] == "2" {
				k += 4
			}
		}
	}
	return st
}
