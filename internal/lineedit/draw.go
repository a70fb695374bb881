package lineedit

import (
	"fmt"
	"io"
	"strings"

	"github.com/agentbox/agentbox/internal/render"
)

// runeWidth is the columns a rune takes: 2 for a tab (drawn as two
// spaces) and for wide runes, 0 for combining marks, else 1.
func runeWidth(r rune) int {
	switch {
	case r == '\t':
		return 2
	case isControl(r):
		return 0
	}
	return render.RuneWidth(r)
}

func itemWidth(it item) int {
	if it.paste != "" {
		return len(it.label())
	}
	return runeWidth(it.r)
}

func itemsWidth(its []item) int {
	w := 0
	for _, it := range its {
		w += itemWidth(it)
	}
	return w
}

// glyph is text drawn as one piece and the columns it takes.
type glyph struct {
	s string
	w int
}

// glyphs is how an item is drawn; never a C0 control.
func glyphs(it item) []glyph {
	if it.paste != "" {
		var gs []glyph
		for _, c := range it.label() {
			gs = append(gs, glyph{string(c), 1})
		}
		return gs
	}
	switch {
	case it.r == '\t':
		return []glyph{{"  ", 2}}
	case isControl(it.r):
		return nil
	}
	return []glyph{{string(it.r), runeWidth(it.r)}}
}

// screen draws the edit area: it writes text and keeps the row and column
// the terminal's cursor is at, counted from the area's top-left corner.
type screen struct {
	sb       strings.Builder
	width    int
	row, col int // col == width: the terminal's pending wrap
}

func (s *screen) newline() {
	s.sb.WriteString("\r\n")
	s.row, s.col = s.row+1, 0
}

func (s *screen) put(g glyph) {
	if s.col > 0 && s.col+g.w > s.width {
		s.newline()
	}
	s.sb.WriteString(g.s)
	s.col += g.w
}

func (s *screen) putString(str string) {
	for _, r := range str {
		for _, g := range glyphs(item{r: r}) {
			s.put(g)
		}
	}
}

// settle ends a pending wrap, so the cursor is where it is counted.
func (s *screen) settle() {
	if s.col >= s.width {
		s.newline()
	}
}

// moveTo moves the cursor up to row (at or above the current one), col.
func (s *screen) moveTo(row, col int) {
	if n := s.row - row; n > 0 {
		fmt.Fprintf(&s.sb, "\x1b[%dA", n)
	}
	s.sb.WriteString("\r")
	if col > 0 {
		fmt.Fprintf(&s.sb, "\x1b[%dC", col)
	}
	s.row, s.col = row, col
}

// layout writes the prompts and the buffer on s and returns where the
// cursor belongs.
func layout(s *screen, b *buffer, prompt, cont string) (row, col int) {
	s.putString(prompt)
	for i, it := range b.items {
		if i == b.pos {
			row, col = s.cursor(it.r == '\n' && it.paste == "")
		}
		if it.r == '\n' && it.paste == "" {
			s.newline()
			s.putString(cont)
			continue
		}
		for _, g := range glyphs(it) {
			s.put(g)
		}
	}
	if b.pos == len(b.items) {
		row, col = s.cursor(false)
	}
	return row, col
}

// cursor is where the cursor is shown at the current point: after the
// last column it is the next row's start (the text goes on there, or
// settle makes it) unless a line break comes next.
func (s *screen) cursor(lineBreak bool) (row, col int) {
	switch {
	case s.col < s.width:
		return s.row, s.col
	case lineBreak:
		return s.row, s.width - 1
	}
	return s.row + 1, 0
}

// width is the terminal's width now.
func (e *Editor) width() int {
	if e.cfg.Width != nil {
		if w := e.cfg.Width(); w > 0 {
			return w
		}
	}
	return 80
}

// height is the terminal's height now.
func (e *Editor) height() int {
	if e.cfg.Height != nil {
		if h := e.cfg.Height(); h > 0 {
			return h
		}
	}
	return 24
}

// fits reports whether text, as the whole message, leaves the edit area
// shorter than the screen: an area taller than the screen cannot be
// redrawn in place (the cursor cannot go above the screen's top row).
func (e *Editor) fits(text string) bool {
	w, prompt := e.width(), 0
	for _, r := range e.cfg.Prompt {
		prompt += runeWidth(r)
	}
	rows := 0
	for line := range strings.SplitSeq(text, "\n") {
		cols := prompt
		for _, r := range line {
			cols += runeWidth(r)
		}
		rows += max(1, (cols+w-1)/w)
		if rows >= e.height()-1 {
			return false
		}
	}
	return true
}

// begin starts a redraw: it erases from the edit area's first row down.
func (e *Editor) begin() *screen {
	s := &screen{width: e.width()}
	if e.rows > 0 {
		fmt.Fprintf(&s.sb, "\x1b[%dA", e.rows)
	}
	s.sb.WriteString("\r\x1b[J")
	return s
}

// place draws the edit area from s's position, puts the cursor in it and
// writes the whole redraw at once.
func (e *Editor) place(s *screen) {
	row, col := layout(s, &e.buf, e.cfg.Prompt, e.cfg.Continue)
	s.settle()
	s.moveTo(row, col)
	e.rows, e.dirty = row, false
	e.write(s)
}

// write sends one redraw; a terminal that cannot be written to leaves
// nothing to do.
func (e *Editor) write(s *screen) {
	_, _ = io.WriteString(e.out, s.sb.String())
}

func (e *Editor) redraw() { e.place(e.begin()) }

// note shows a line above the edit area.
func (e *Editor) note(msg string) {
	s := e.begin()
	s.putString(msg)
	s.newline()
	s.row = 0 // the edit area starts below the note
	e.place(s)
}

// clearScreen is Ctrl-L: the edit area is drawn at the top of a clear screen.
func (e *Editor) clearScreen() {
	s := &screen{width: e.width()}
	s.sb.WriteString("\x1b[H\x1b[2J")
	e.place(s)
}

// finish draws the edit area as it stands, then tail after its text and
// below on a line of its own, and leaves the cursor on a new line: the
// edit area is done.
func (e *Editor) finish(tail, below string) {
	s := e.begin()
	layout(s, &e.buf, e.cfg.Prompt, e.cfg.Continue)
	s.putString(tail)
	s.newline()
	if below != "" {
		s.putString(below)
		s.newline()
	}
	e.rows, e.dirty = 0, false
	e.write(s)
}
