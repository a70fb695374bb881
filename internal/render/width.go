package render

import (
	"strings"

	"golang.org/x/text/width"
)

// RuneWidth is the columns a printable rune takes on a terminal: 2 for
// East Asian wide and fullwidth runes, 0 for combining marks and
// zero-width joiners, else 1.
func RuneWidth(r rune) int {
	switch {
	case r >= 0x300 && r <= 0x36f, r == 0x200b, r == 0x200d:
		return 0
	}
	switch width.LookupRune(r).Kind() {
	case width.EastAsianWide, width.EastAsianFullwidth:
		return 2
	}
	return 1
}

// textWidth is the columns s takes on one line.
func textWidth(s string) int {
	n := 0
	for _, r := range s {
		n += RuneWidth(r)
	}
	return n
}

// cutWidth is s cut to at most cols columns.
func cutWidth(s string, cols int) string {
	var sb strings.Builder
	n := 0
	for _, r := range s {
		if n += RuneWidth(r); n > cols {
			break
		}
		sb.WriteRune(r)
	}
	return sb.String()
}
