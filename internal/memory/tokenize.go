package memory

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxTerm is the longest term indexed; longer runs are blobs (base64,
// minified code) nobody searches for.
const maxTerm = 64

// terms calls fn with each term of text and its byte offset. A term is a
// run of letters and digits, lowercased. A run that mixes cases or letters
// and digits (parseHTTPRequest, sha256) also yields its parts (parse, http,
// request; sha, 256), so a query for either form finds it; snake_case and
// dotted names split on their punctuation anyway.
func terms(text string, fn func(term string, at int)) {
	start := -1
	for i := 0; i <= len(text); {
		alnum, width := false, 1
		if i < len(text) {
			alnum, width = isAlnum(text, i)
		}
		switch {
		case alnum && start < 0:
			start = i
		case !alnum && start >= 0:
			run(text[start:i], start, fn)
			start = -1
		}
		i += width
	}
}

// isAlnum reports whether text[i:] starts with a letter or digit, and the
// width of the character there.
func isAlnum(text string, i int) (bool, int) {
	c := text[i]
	if c < utf8.RuneSelf {
		return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9', 1
	}
	r, w := utf8.DecodeRuneInString(text[i:])
	return unicode.IsLetter(r) || unicode.IsDigit(r), w
}

// run emits one run of letters and digits and its parts.
func run(s string, at int, fn func(string, int)) {
	if len(s) > maxTerm {
		return
	}
	fn(lower(s), at)
	prev := 0
	for i := 1; i < len(s); i++ {
		if boundary(s, i) {
			part(s[prev:i], at+prev, fn)
			prev = i
		}
	}
	if prev > 0 {
		part(s[prev:], at+prev, fn)
	}
}

// part emits a part of a run, skipping single letters.
func part(s string, at int, fn func(string, int)) {
	if len(s) > 1 || isDigit(s[0]) {
		fn(lower(s), at)
	}
}

// boundary reports whether an ASCII run splits before s[i]: lower to
// upper (parseHTTP), the last upper of a capital run before a lower
// (HTTPRequest), and letters to digits and back.
func boundary(s string, i int) bool {
	a, b := s[i-1], s[i]
	if a >= utf8.RuneSelf || b >= utf8.RuneSelf {
		return false
	}
	switch {
	case isDigit(a) != isDigit(b):
		return true
	case isLower(a) && isUpper(b):
		return true
	case isUpper(a) && isUpper(b) && i+1 < len(s) && isLower(s[i+1]):
		return true
	}
	return false
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }

// lower lowercases s, without copying it if it already is.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; isUpper(c) || c >= utf8.RuneSelf {
			return strings.ToLower(s)
		}
	}
	return s
}
