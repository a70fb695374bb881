package lineedit

import (
	"bytes"
	"time"
	"unicode/utf8"
)

// keyKind names what a key does; keyRune carries a rune, keyPaste a text.
type keyKind int

const (
	keyRune keyKind = iota
	keyPaste
	keyEnter
	keyAltEnter
	keyBackspace
	keyDelete
	keyLeft
	keyRight
	keyUp
	keyDown
	keyHome
	keyEnd
	keyWordLeft
	keyWordRight
	keyInterrupt // Ctrl-C
	keyEOF       // Ctrl-D
	keyDeleteWord
	keyKillStart // Ctrl-U
	keyKillEnd   // Ctrl-K
	keyClear     // Ctrl-L
	keyExpand    // Ctrl-O
)

// key is one decoded keystroke (or one whole bracketed paste).
type key struct {
	kind keyKind
	r    rune
	text string // keyPaste: the cleaned text
	cut  bool   // keyPaste: the paste was cut to pasteMax
}

const (
	pasteMax   = 1 << 20
	escTimeout = 50 * time.Millisecond
)

var (
	pasteStart = []byte("\x1b[200~")
	pasteEnd   = []byte("\x1b[201~")
)

// controls maps the C0 bytes that are keys; other C0 bytes are dropped.
var controls = map[byte]keyKind{
	0x01: keyHome, 0x02: keyLeft, 0x03: keyInterrupt, 0x04: keyEOF,
	0x05: keyEnd, 0x06: keyRight, 0x08: keyBackspace, 0x0a: keyEnter,
	0x0b: keyKillEnd, 0x0c: keyClear, 0x0d: keyEnter, 0x0e: keyDown,
	0x0f: keyExpand, 0x10: keyUp, 0x15: keyKillStart, 0x17: keyDeleteWord,
	0x7f: keyBackspace,
}

// decoder turns the bytes read from the terminal into keys. It keeps an
// incomplete sequence (a split escape sequence, UTF-8 rune or paste) for
// the next read.
type decoder struct {
	pend    []byte    // bytes of an incomplete key
	pendAt  time.Time // when pend got its first byte
	inPaste bool
	paste   []byte    // raw paste bytes so far (at most pasteMax + a marker)
	scanned int       // paste[:scanned] holds no complete end marker
	cut     bool      // bytes of the paste were dropped
	lastAt  time.Time // when the last bytes came
}

// pasteStuck is how long a paste must have been quiet for a Ctrl-C to end
// it: a terminal that lost the end marker must not swallow every key.
const pasteStuck = time.Second

// feed decodes b, read at now, and returns the complete keys.
func (d *decoder) feed(b []byte, now time.Time) []key {
	if len(d.pend) == 1 && d.pend[0] == 0x1b && now.Sub(d.pendAt) > escTimeout {
		d.pend = d.pend[:0] // a lone ESC: ignored
	}
	if len(d.pend) == 0 {
		d.pendAt = now
	}
	var keys []key
	if d.inPaste && len(b) > 0 && b[0] == 0x03 && now.Sub(d.lastAt) > pasteStuck {
		// The paste never ended: keep what came and take the Ctrl-C as a key.
		_, k, _ := d.pasteBytes(pasteEnd)
		keys = append(keys, k)
	}
	d.lastAt = now
	buf := append(d.pend, b...)
	for len(buf) > 0 {
		if d.inPaste {
			var k key
			var done bool
			if buf, k, done = d.pasteBytes(buf); done {
				keys = append(keys, k)
			}
			continue
		}
		k, n, ok := decodeKey(buf)
		if n == 0 { // incomplete
			break
		}
		if ok && k.kind == keyPaste {
			d.inPaste = true
		} else if ok {
			keys = append(keys, k)
		}
		buf = buf[n:]
	}
	d.pend = append(d.pend[:0:0], buf...)
	return keys
}

// pasteBytes adds b to the paste; when b holds the end marker it returns
// the bytes after it and the paste key.
func (d *decoder) pasteBytes(b []byte) ([]byte, key, bool) {
	d.paste = append(d.paste, b...)
	from := max(0, d.scanned-len(pasteEnd)+1)
	if i := bytes.Index(d.paste[from:], pasteEnd); i >= 0 {
		i += from
		rest := append([]byte(nil), d.paste[i+len(pasteEnd):]...)
		raw := d.paste[:i]
		cut := d.cut || len(raw) > pasteMax
		if len(raw) > pasteMax {
			raw = raw[:pasteMax]
		}
		k := key{kind: keyPaste, text: cleanPaste(raw), cut: cut}
		d.inPaste, d.paste, d.scanned, d.cut = false, nil, 0, false
		return rest, k, true
	}
	if keep := pasteMax + len(pasteEnd) - 1; len(d.paste) > keep {
		// Keep the first pasteMax bytes and the tail that may begin the marker.
		tail := d.paste[len(d.paste)-len(pasteEnd)+1:]
		d.paste = append(d.paste[:pasteMax], tail...)
		d.cut = true
	}
	d.scanned = len(d.paste)
	return nil, key{}, false
}

// cleanPaste makes pasted bytes text to insert: CRLF and CR become LF,
// control characters other than tab and newline and invalid UTF-8 are
// dropped, and so is one trailing newline.
func cleanPaste(raw []byte) string {
	var sb bytes.Buffer
	for i := 0; i < len(raw); {
		r, n := utf8.DecodeRune(raw[i:])
		switch {
		case r == '\r':
			sb.WriteByte('\n')
			if i+1 < len(raw) && raw[i+1] == '\n' {
				n++
			}
		case r == utf8.RuneError && n <= 1, isControl(r) && r != '\t' && r != '\n':
		default:
			sb.WriteRune(r)
		}
		i += n
	}
	return string(bytes.TrimSuffix(sb.Bytes(), []byte("\n")))
}

// isControl reports a C0 or C1 control or DEL.
func isControl(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0)
}

// decodeKey decodes the key at the start of b: it returns the key, the
// bytes it used, and whether it is a key (false: consumed and ignored).
// n == 0 means b holds only the start of a key.
func decodeKey(b []byte) (k key, n int, ok bool) {
	c := b[0]
	switch {
	case c == 0x1b:
		return decodeEscape(b)
	case c == '\r' && len(b) > 1 && b[1] == '\n':
		return key{kind: keyEnter}, 2, true // one Enter, not two
	case c == '\t':
		return key{kind: keyRune, r: '\t'}, 1, true
	case c < 0x20 || c == 0x7f:
		kind, ok := controls[c]
		return key{kind: kind}, 1, ok
	}
	if !utf8.FullRune(b) {
		return key{}, 0, false
	}
	r, n := utf8.DecodeRune(b)
	if r == utf8.RuneError && n <= 1 || isControl(r) {
		return key{}, 1, false // dropped byte by byte
	}
	return key{kind: keyRune, r: r}, n, true
}

// decodeEscape decodes a key starting with ESC.
func decodeEscape(b []byte) (key, int, bool) {
	if len(b) < 2 {
		return key{}, 0, false
	}
	switch b[1] {
	case '[':
		return decodeCSI(b)
	case 'O':
		if len(b) < 3 {
			return key{}, 0, false
		}
		k, ok := ss3Keys[b[2]]
		return key{kind: k}, 3, ok
	case '\r', '\n':
		return key{kind: keyAltEnter}, 2, true
	case 'b', 'B':
		return key{kind: keyWordLeft}, 2, true
	case 'f', 'F':
		return key{kind: keyWordRight}, 2, true
	case 0x7f, 0x08:
		return key{kind: keyDeleteWord}, 2, true
	}
	if b[1] >= 0x20 && b[1] < 0x7f {
		return key{}, 2, false // an unknown Alt-key
	}
	return key{}, 1, false // ESC before a control or a non-ASCII rune
}

var ss3Keys = map[byte]keyKind{
	'A': keyUp, 'B': keyDown, 'C': keyRight, 'D': keyLeft, 'H': keyHome, 'F': keyEnd,
}

var csiKeys = map[string]keyKind{
	"A": keyUp, "B": keyDown, "C": keyRight, "D": keyLeft, "H": keyHome, "F": keyEnd,
	"1~": keyHome, "7~": keyHome, "4~": keyEnd, "8~": keyEnd, "3~": keyDelete,
	"1;5C": keyWordRight, "1;5D": keyWordLeft, "1;3C": keyWordRight, "1;3D": keyWordLeft,
	"5C": keyWordRight, "5D": keyWordLeft,
	"1;5A": keyUp, "1;5B": keyDown, "1;5H": keyHome, "1;5F": keyEnd,
	"200~": keyPaste,
}

// decodeCSI decodes ESC [ parameters (0x30–0x3F), intermediates
// (0x20–0x2F) and a final byte (0x40–0x7E). A byte out of place ends the
// sequence, which is dropped.
func decodeCSI(b []byte) (key, int, bool) {
	for i := 2; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= 0x20 && c <= 0x3f:
			continue
		case c >= 0x40 && c <= 0x7e:
			kind, ok := csiKeys[string(b[2:i+1])]
			return key{kind: kind}, i + 1, ok
		default:
			return key{}, i, false
		}
	}
	return key{}, 0, false
}
