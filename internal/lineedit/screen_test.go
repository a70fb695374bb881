package lineedit

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// vt is a small model of a terminal screen: enough of VT100 to check
// what a user sees after the editor's output.
type vt struct {
	t        *testing.T
	width    int
	grid     [][]rune
	row, col int // col == width: pending wrap
}

func newVT(t *testing.T, width int) *vt {
	return &vt{t: t, width: width}
}

func (m *vt) cell(r, c int) *rune {
	for len(m.grid) <= r {
		m.grid = append(m.grid, []rune(strings.Repeat(" ", m.width)))
	}
	return &m.grid[r][c]
}

// apply interprets out.
func (m *vt) apply(out string) {
	m.t.Helper()
	for len(out) > 0 {
		r, n := utf8.DecodeRuneInString(out)
		switch {
		case r == '\r':
			m.col = 0
		case r == '\n':
			m.row++
			m.col = min(m.col, m.width-1)
		case r == 0x1b:
			n = m.escape(out)
		case r < 0x20 || r == 0x7f:
			m.t.Fatalf("control %#x written to the terminal", r)
		default:
			m.print(r)
		}
		out = out[n:]
	}
}

func (m *vt) print(r rune) {
	w := runeWidth(r)
	if m.col+w > m.width {
		m.row, m.col = m.row+1, 0
	}
	*m.cell(m.row, m.col) = r
	if w == 2 {
		*m.cell(m.row, m.col+1) = 0 // the right half of a wide rune
	}
	m.col += w
}

// escape applies the CSI sequence at the start of s and returns its length.
func (m *vt) escape(s string) int {
	m.t.Helper()
	if len(s) < 3 || s[1] != '[' {
		m.t.Fatalf("unexpected escape %q", s)
	}
	i := 2
	for i < len(s) && (s[i] < 0x40 || s[i] > 0x7e) {
		i++
	}
	params, final := s[2:i], s[i]
	n := 1
	if v, err := strconv.Atoi(params); err == nil {
		n = v
	}
	m.col = min(m.col, m.width-1)
	switch final {
	case 'A':
		m.row = max(m.row-n, 0)
	case 'B':
		m.row += n
	case 'C':
		m.col = min(m.col+n, m.width-1)
	case 'D':
		m.col = max(m.col-n, 0)
	case 'H':
		m.row, m.col = 0, 0
	case 'J':
		m.clear(params)
	case 'K':
		for c := m.col; c < m.width; c++ {
			*m.cell(m.row, c) = ' '
		}
	case 'h', 'l': // modes such as bracketed paste
	default:
		m.t.Fatalf("unexpected escape %q", s[:i+1])
	}
	return i + 1
}

func (m *vt) clear(params string) {
	if params == "2" {
		m.grid = nil
		return
	}
	for c := m.col; c < m.width; c++ {
		*m.cell(m.row, c) = ' '
	}
	if m.row+1 < len(m.grid) {
		m.grid = m.grid[:m.row+1]
	}
}

// lines is the screen's text, trailing blanks and empty rows dropped.
func (m *vt) lines() []string {
	var ls []string
	for _, row := range m.grid {
		var sb strings.Builder
		for _, r := range row {
			if r != 0 {
				sb.WriteRune(r)
			}
		}
		ls = append(ls, strings.TrimRight(sb.String(), " "))
	}
	for len(ls) > 0 && ls[len(ls)-1] == "" {
		ls = ls[:len(ls)-1]
	}
	return ls
}

func (m *vt) screen() string { return strings.Join(m.lines(), "\n") }

func TestTermModel(t *testing.T) {
	m := newVT(t, 5)
	m.apply("abcde\r\nfg\x1b[1A\r\x1b[2Cx\x1b[J")
	if got, want := m.screen(), "abx"; got != want {
		t.Errorf("screen %q, want %q", got, want)
	}
}
