package memory

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Spill cuts a tool output over limit bytes to its head and tail, joined by
// a line saying how much was cut and that the whole text is at path (the
// caller saves it there, in the job's workspace). It reports whether it
// cut. The result is at most limit bytes unless limit is shorter than that
// line; cuts fall on line ends when one is near, never inside a character.
func Spill(text string, limit int, path string) (shown string, spilled bool) {
	if len(text) <= limit {
		return text, false
	}
	return cutMiddle(text, limit, func(n int) string {
		return fmt.Sprintf("\n\n[… %d of %d bytes not shown; the whole output is saved at %s …]\n\n", n, len(text), path)
	}), true
}

// cutMiddle keeps the head (two thirds) and tail of text in about keep
// bytes, joined by marker(bytes cut). The result is at most keep bytes when
// the marker fits in keep.
func cutMiddle(text string, keep int, marker func(cut int) string) string {
	if len(text) <= keep {
		return text
	}
	room := max(keep-len(marker(len(text))), 0)
	h := headEnd(text, 0, room*2/3)
	t := tailStart(text, max(len(text)-(room-h), h), len(text))
	return text[:h] + marker(t-h) + text[t:]
}

// headEnd returns the end of a head text[lo:n] cut at most at n: after a
// newline in its last fifth if there is one, else at a character boundary.
func headEnd(text string, lo, n int) int {
	if n >= len(text) {
		return len(text)
	}
	from := n - (n-lo)/5
	if i := strings.LastIndexByte(text[from:n], '\n'); i >= 0 {
		return from + i + 1
	}
	for n > lo && !utf8.RuneStart(text[n]) {
		n--
	}
	return n
}

// tailStart returns the start of a tail text[i:hi] cut at least at i: after
// a newline in its first fifth if there is one, else at a character
// boundary.
func tailStart(text string, i, hi int) int {
	if i >= hi {
		return hi
	}
	if j := strings.IndexByte(text[i:i+(hi-i)/5], '\n'); j >= 0 {
		return i + j + 1
	}
	for i < hi && !utf8.RuneStart(text[i]) {
		i++
	}
	return i
}
