package lineedit

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// pasteLines is the most lines a paste may have and still be inserted as
// text; a longer one becomes a placeholder.
const pasteLines = 10

// item is one element of the buffer: a rune, or (paste != "") a long
// paste shown as a placeholder and edited as one piece.
type item struct {
	r     rune
	paste string
}

// label is what a placeholder shows.
func (it item) label() string {
	if n := strings.Count(it.paste, "\n") + 1; n > 1 {
		return fmt.Sprintf("[pasted %d lines]", n)
	}
	return fmt.Sprintf("[pasted %d characters]", utf8.RuneCountInString(it.paste))
}

// buffer is the message being edited and the cursor in it.
type buffer struct {
	items []item
	pos   int // the cursor: items[:pos] are before it
}

// String is the message: the runes and the full text of each paste.
func (b *buffer) String() string {
	var sb strings.Builder
	for _, it := range b.items {
		if it.paste != "" {
			sb.WriteString(it.paste)
		} else {
			sb.WriteRune(it.r)
		}
	}
	return sb.String()
}

// set replaces the buffer by s with the cursor at the end.
func (b *buffer) set(s string) {
	b.items = b.items[:0]
	for _, r := range s {
		b.items = append(b.items, item{r: r})
	}
	b.pos = len(b.items)
}

func (b *buffer) insert(its ...item) {
	b.items = append(b.items[:b.pos], append(its, b.items[b.pos:]...)...)
	b.pos += len(its)
}

func (b *buffer) insertText(s string) {
	its := make([]item, 0, len(s))
	for _, r := range s {
		its = append(its, item{r: r})
	}
	b.insert(its...)
}

// insertPaste inserts a paste as text, or as a placeholder when it is
// long or does not fit on the screen.
func (b *buffer) insertPaste(s string, fits bool) {
	if s == "" {
		return
	}
	if !fits || strings.Count(s, "\n") >= pasteLines {
		b.insert(item{paste: s})
		return
	}
	b.insertText(s)
}

// remove deletes items[from:to] and puts the cursor at from.
func (b *buffer) remove(from, to int) {
	if from >= to {
		return
	}
	b.items = append(b.items[:from], b.items[to:]...)
	b.pos = from
}

// lineStart and lineEnd are the bounds of the line holding the cursor.
func (b *buffer) lineStart() int {
	i := b.pos
	for i > 0 && b.items[i-1].r != '\n' {
		i--
	}
	return i
}

func (b *buffer) lineEnd() int {
	i := b.pos
	for i < len(b.items) && b.items[i].r != '\n' {
		i++
	}
	return i
}

func (b *buffer) isSpace(i int) bool {
	return b.items[i].paste == "" && unicode.IsSpace(b.items[i].r)
}

// wordLeft is where the word before the cursor starts.
func (b *buffer) wordLeft() int {
	i := b.pos
	for i > 0 && b.isSpace(i-1) {
		i--
	}
	for i > 0 && !b.isSpace(i-1) {
		i--
	}
	return i
}

// wordRight is where the word after the cursor ends.
func (b *buffer) wordRight() int {
	i := b.pos
	for i < len(b.items) && b.isSpace(i) {
		i++
	}
	for i < len(b.items) && !b.isSpace(i) {
		i++
	}
	return i
}

// endsWithEscape reports whether the last line ends with an odd number
// of backslashes, a request to go on to a new line.
func (b *buffer) endsWithEscape() bool {
	n := 0
	for i := len(b.items) - 1; i >= 0 && b.items[i] == (item{r: '\\'}); i-- {
		n++
	}
	return n%2 == 1
}

// expand turns the placeholder just before the cursor into its text.
func (b *buffer) expand() bool {
	if b.pos == 0 || b.items[b.pos-1].paste == "" {
		return false
	}
	text := b.items[b.pos-1].paste
	b.remove(b.pos-1, b.pos)
	b.insertText(text)
	return true
}

// lineIndex is the number of the cursor's line (0 for the first).
func (b *buffer) lineIndex() int {
	n := 0
	for _, it := range b.items[:b.pos] {
		if it.r == '\n' {
			n++
		}
	}
	return n
}

func (b *buffer) lastLine() bool { return b.lineEnd() == len(b.items) }

// vertical moves the cursor to the previous (up) or next line, to the
// same display column or the line's end. It reports false on the first
// (up) or last line.
func (b *buffer) vertical(up bool) bool {
	start := b.lineStart()
	col := itemsWidth(b.items[start:b.pos])
	var target int // start of the target line
	switch {
	case up && start == 0, !up && b.lastLine():
		return false
	case up:
		b.pos = start - 1
		target = b.lineStart()
	default:
		target = b.lineEnd() + 1
	}
	b.pos = target
	for w := 0; b.pos < len(b.items) && b.items[b.pos].r != '\n'; b.pos++ {
		if w += itemWidth(b.items[b.pos]); w > col {
			break
		}
	}
	return true
}
