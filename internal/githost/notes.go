package githost

import (
	"fmt"
	"strings"
)

// maxNotes bounds the notes of each kind one tree keeps; the rest are
// only counted: a workspace can hold millions of entries to note.
const maxNotes = 100

// maxNotePath is how much of a path a note quotes.
const maxNotePath = 256

// noteList is the first maxNotes notes of a kind, and how many more.
type noteList struct {
	list []string
	more int
}

func (n *noteList) add(note string) {
	if !n.full() {
		n.list = append(n.list, note)
		return
	}
	n.more++
}

// full says further notes are only counted.
func (n noteList) full() bool { return len(n.list) >= maxNotes }

// len is how many notes were taken, kept or not.
func (n noteList) len() int { return len(n.list) + n.more }

// first lists the first few notes, and says how many more there are.
func (n noteList) first(few int) string {
	few = min(few, len(n.list))
	s := strings.Join(n.list[:few], "; ")
	if rest := n.len() - few; rest > 0 {
		s += fmt.Sprintf("; and %d more", rest)
	}
	return s
}

// treeNotes say how a tree differs from `git add -A` of its workspace.
type treeNotes struct {
	// lacking are files recorded as a note instead of their content, and
	// entries left out: a tree with any is not the workspace's.
	lacking noteList
	// rules are .gitignore files taken as absent: the tree holds what
	// they would have ignored, and every file of the workspace.
	rules noteList
}

// short is p as a note quotes it: cut after maxNotePath bytes.
func short(p string) string {
	if len(p) <= maxNotePath {
		return p
	}
	return p[:maxNotePath] + "…"
}
