package render

import (
	"regexp"
	"strings"
)

// shellSafe matches a word the shell takes as it is.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:@%+=,-]+$`)

// ShellQuote is s as one shell word, for a command line printed for a
// person to paste.
func ShellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
