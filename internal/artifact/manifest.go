package artifact

import (
	"archive/zip"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
)

// ManifestName is the file at the root of a zip that lists what was left
// out or stored differently, and why. It is there only when something was.
const ManifestName = "AGENTBOX-OMITTED.txt"

// maxNotes bounds the notes a report lists; the rest are only counted.
const maxNotes = 10000

// Note is one workspace entry the zip left out, or stored under another
// name or with another link target.
type Note struct {
	Path  string // in the workspace
	Entry string // the entry's name in the zip; "" when left out
	Why   string
}

// Report says what a zip left out or stored differently.
type Report struct {
	Notes []Note // the first maxNotes notes
	More  int    // notes beyond those in Notes
}

// Len is the number of notes, listed or not.
func (r Report) Len() int { return len(r.Notes) + r.More }

// String is the report as the manifest has it: a header, then a line per
// note, names quoted as Go strings.
func (r Report) String() string {
	var b strings.Builder
	b.WriteString("agentbox left these workspace entries out of this zip, or stored them differently.\n")
	b.WriteString("Names are quoted as Go strings; paths are relative to the workspace.\n\n")
	for _, n := range r.Notes {
		switch {
		case n.Entry == "":
			fmt.Fprintf(&b, "left out %q: %s\n", n.Path, n.Why)
		case n.Entry != n.Path:
			fmt.Fprintf(&b, "stored %q as %q: %s\n", n.Path, n.Entry, n.Why)
		default:
			fmt.Fprintf(&b, "changed %q: %s\n", n.Path, n.Why)
		}
	}
	if r.More > 0 {
		fmt.Fprintf(&b, "... and %d more\n", r.More)
	}
	return b.String()
}

func (z *zipper) note(n Note) {
	if len(z.report.Notes) < maxNotes {
		z.report.Notes = append(z.report.Notes, n)
	} else {
		z.report.More++
	}
}

func (z *zipper) leftOut(p, why string) { z.note(Note{Path: p, Why: why}) }

// unreadable leaves out an entry that could not be read, and tells Skip.
func (z *zipper) unreadable(p string, err error) {
	if z.opts.Skip != nil {
		z.opts.Skip(p, err)
	}
	z.leftOut(p, "unreadable: "+err.Error())
}

// stored notes an entry stored under another name than its own. Only the
// renamed component counts: what is under a renamed directory follows it.
func (z *zipper) stored(p, entry string) {
	base, ebase := path.Base(p), path.Base(entry)
	switch {
	case base == ebase:
	case safeName(base) != base:
		z.note(Note{Path: p, Entry: entry, Why: "not a safe name on every system"})
	case path.Dir(p) == "." && foldName(base) == foldName(ManifestName):
		z.note(Note{Path: p, Entry: entry, Why: "the zip keeps this name for its manifest"})
	case path.Dir(p) == "." && z.isExtra(base):
		z.note(Note{Path: p, Entry: entry, Why: "the zip keeps this name for agentbox's own " + base})
	default:
		z.note(Note{Path: p, Entry: entry, Why: "another entry has the same name, ignoring case"})
	}
}

// writeManifest stores the report as ManifestName, when it has notes.
func (z *zipper) writeManifest() error {
	if z.report.Len() == 0 {
		return nil
	}
	fh := &zip.FileHeader{Name: ManifestName, Method: zip.Deflate, Modified: time.Now()}
	fh.SetMode(0o644)
	w, err := z.zw.CreateHeader(fh)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, z.report.String())
	return err
}
