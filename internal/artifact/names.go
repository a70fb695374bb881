package artifact

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxNameBytes is the longest name component most file systems take;
// maxExtBytes is the longest extension a renamed entry keeps at its end.
const (
	maxNameBytes = 255
	maxExtBytes  = 32
)

// safeName returns name, one path component, changed so that common
// extractors on Linux, macOS and Windows create a file of that name in the
// directory they extract into, and nothing else: each run of invalid
// UTF-8, each control character, `\` and the characters Windows forbids
// (<>:"|?*) become '_', as do trailing dots and spaces (Windows drops
// them; "." and ".." become "_" and "__"); a name Windows keeps for a
// device (CON, NUL.txt, COM1...) gets a leading '_'.
func safeName(name string) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || strings.ContainsRune(`\<>:"|?*/`, r) {
			return '_'
		}
		return r
	}, strings.ToValidUTF8(name, "_"))
	trimmed := strings.TrimRight(s, ". ")
	s = trimmed + strings.Repeat("_", len(s)-len(trimmed))
	if reservedOnWindows(s) {
		s = "_" + s
	}
	return s
}

// reservedOnWindows reports whether Windows opens a device for name: the
// part before the first dot, trailing spaces dropped, is CON, PRN, AUX,
// NUL, CONIN$, CONOUT$, or COM or LPT and a digit or superscript digit.
func reservedOnWindows(name string) bool {
	stem, _, _ := strings.Cut(name, ".")
	stem = strings.ToUpper(strings.TrimRight(stem, " "))
	switch stem {
	case "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$":
		return true
	}
	if len(stem) < 4 || (stem[:3] != "COM" && stem[:3] != "LPT") {
		return false
	}
	switch stem[3:] {
	case "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "¹", "²", "³":
		return true
	}
	return false
}

// siblingNames returns the entry names of the entries of one directory,
// in order: each made safe, and no two equal ignoring case (nor equal to
// a reserved name), so that no entry overwrites or merges with another on
// a case-insensitive file system. Names that are already safe are claimed
// first, so a renamed entry never displaces one that was fine.
func siblingNames(names, reserved []string) []string {
	n := namer{taken: make(map[string]bool, len(names)+len(reserved)), next: map[string]int{}}
	for _, r := range reserved {
		n.taken[foldName(r)] = true
	}
	out := make([]string, len(names))
	for i, name := range names {
		if k := foldName(name); safeName(name) == name && !n.taken[k] {
			out[i], n.taken[k] = name, true
		}
	}
	for i, name := range names {
		if out[i] == "" {
			out[i] = n.unused(safeName(name))
		}
	}
	return out
}

// namer hands out the names of one directory.
type namer struct {
	taken map[string]bool // folded names handed out
	next  map[string]int  // per folded stem and extension, the next suffix to try
}

// unused returns name, or else name with a suffix before its extension
// ("notes_2.txt"), whichever is free, and takes it. Names cut to the same
// stem share a count of the suffixes tried, so many names made the same
// cost linear time, not quadratic.
func (n *namer) unused(name string) string {
	if k := foldName(name); len(name) <= maxNameBytes && !n.taken[k] {
		n.taken[k] = true
		return name
	}
	stem, ext := name, ""
	if i := strings.LastIndexByte(name, '.'); i > 0 && len(name)-i <= maxExtBytes {
		stem, ext = name[:i], name[i:]
	}
	key := foldName(truncate(stem, maxNameBytes-maxExtBytes-12) + ext) // what every suffixed name keeps
	for i := max(n.next[key], 2); ; i++ {
		suffix := "_" + strconv.Itoa(i) + ext
		c := truncate(stem, maxNameBytes-len(suffix)) + suffix
		if k := foldName(c); !n.taken[k] {
			n.taken[k], n.next[key] = true, i+1
			return c
		}
	}
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// foldName is the key under which case-insensitive file systems compare
// names.
func foldName(name string) string {
	return strings.ToLower(name)
}
