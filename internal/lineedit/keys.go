package lineedit

import (
	"io"
	"strings"
)

// pasteCutNote is the line shown when a paste is cut to pasteMax.
const pasteCutNote = "(paste cut to 1 MiB)"

// quitHint is the line shown on Ctrl-C with nothing typed.
const quitHint = "(Ctrl-D or /quit to leave)"

// handle applies one key; done with the message (or io.EOF) ends ReadLine.
func (e *Editor) handle(k key) (line string, done bool, err error) {
	b := &e.buf
	e.dirty = true
	switch k.kind {
	case keyEnter:
		if !b.endsWithEscape() {
			return e.submit(), true, nil
		}
		b.items[len(b.items)-1] = item{r: '\n'}
		b.pos = len(b.items)
	case keyEOF:
		if len(b.items) == 0 {
			e.finish("", "")
			return "", true, io.EOF
		}
		b.remove(b.pos, min(b.pos+1, len(b.items)))
	case keyInterrupt:
		e.cancelLine()
	case keyClear:
		e.clearScreen()
	default:
		e.edit(k)
	}
	return "", false, nil
}

// edit applies a key that changes the buffer or moves the cursor.
func (e *Editor) edit(k key) {
	b := &e.buf
	switch k.kind {
	case keyRune:
		b.insert(item{r: k.r})
	case keyPaste:
		b.insertPaste(k.text, e.fits(k.text))
		if k.cut {
			e.note(pasteCutNote)
		}
	case keyAltEnter:
		b.insert(item{r: '\n'})
	case keyExpand:
		if b.pos > 0 && b.items[b.pos-1].paste != "" && !e.fits(b.String()) {
			e.note(tooTallNote)
			return
		}
		b.expand()
	case keyUp, keyDown:
		e.vertical(k.kind == keyUp)
	default:
		e.erase(k)
		e.move(k)
	}
}

// erase applies the keys that delete.
func (e *Editor) erase(k key) {
	b := &e.buf
	switch k.kind {
	case keyBackspace:
		b.remove(max(b.pos-1, 0), b.pos)
	case keyDelete:
		b.remove(b.pos, min(b.pos+1, len(b.items)))
	case keyDeleteWord:
		b.remove(b.wordLeft(), b.pos)
	case keyKillStart:
		b.remove(b.lineStart(), b.pos)
	case keyKillEnd:
		end := b.lineEnd()
		b.remove(b.pos, end)
	}
}

// move applies the keys that move the cursor along the buffer.
func (e *Editor) move(k key) {
	b := &e.buf
	switch k.kind {
	case keyLeft:
		b.pos = max(b.pos-1, 0)
	case keyRight:
		b.pos = min(b.pos+1, len(b.items))
	case keyHome:
		b.pos = b.lineStart()
	case keyEnd:
		b.pos = b.lineEnd()
	case keyWordLeft:
		b.pos = b.wordLeft()
	case keyWordRight:
		b.pos = b.wordRight()
	}
}

// vertical moves between the buffer's lines and, past its first or last
// line, through the history.
func (e *Editor) vertical(up bool) {
	if e.buf.vertical(up) {
		return
	}
	entries := e.hist.entries
	switch {
	case up && e.histPos > 0:
		if e.histPos == len(entries) {
			e.pending = e.buf.String()
		}
		e.histPos--
		e.recall(entries[e.histPos])
	case !up && e.histPos < len(entries):
		e.histPos++
		if e.histPos == len(entries) {
			e.recall(e.pending)
		} else {
			e.recall(entries[e.histPos])
		}
	}
}

// recall puts a message from the history in the buffer: as text, or as
// one placeholder when it would not fit on the screen.
func (e *Editor) recall(text string) {
	e.buf.set("")
	e.buf.insertPaste(text, e.fits(text) && strings.Count(text, "\n") < pasteLines)
}

// tooTallNote answers Ctrl-O on a paste whose text would not fit.
const tooTallNote = "(too long to show in full on this screen; it is sent whole)"

// cancelLine is Ctrl-C: the text typed stays on screen followed by "^C"
// and a fresh prompt starts below; with nothing typed a hint says how to
// leave.
func (e *Editor) cancelLine() {
	if len(e.buf.items) == 0 {
		e.finish("", quitHint)
	} else {
		e.finish("^C", "")
	}
	e.buf = buffer{}
	e.histPos, e.pending = len(e.hist.entries), ""
	e.dirty = true // the fresh prompt
}
