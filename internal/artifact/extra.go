package artifact

import (
	"archive/zip"
	"errors"
	"io"
	"time"
)

// ErrNoExtra, from an Extra's Open, leaves the file out of the zip without
// a note: the job has nothing to put in it.
var ErrNoExtra = errors.New("no such file for this job")

// Extra is a file of agentbox's own a zip holds at its root, beside the
// workspace's entries (agentbox.diff): a workspace entry of the same name
// is stored under another, as for the manifest.
type Extra struct {
	Name string
	// Open returns the file's content, which the zip reads to its end and
	// closes. An error leaves the file out, noted in the manifest.
	Open func() (io.ReadCloser, error)
	// Cut, if set, is asked once the file is stored whether its content
	// was cut short and why ("" if not): the manifest says so.
	Cut func() string
}

// reserved are the names the zip keeps at its root for its own files.
func (z *zipper) reserved() []string {
	names := []string{ManifestName}
	for _, e := range z.opts.Extra {
		if !z.noExtra[e.Name] {
			names = append(names, e.Name)
		}
	}
	return names
}

// isExtra reports whether name is one of the zip's extra files.
func (z *zipper) isExtra(name string) bool {
	for _, e := range z.opts.Extra {
		if !z.noExtra[e.Name] && foldName(e.Name) == foldName(name) {
			return true
		}
	}
	return false
}

// writeExtras stores the extra files, first in the zip. An error reading
// one after it was begun leaves the zip incomplete.
func (z *zipper) writeExtras() error {
	for _, e := range z.opts.Extra {
		rc, err := e.Open()
		if errors.Is(err, ErrNoExtra) {
			if z.noExtra == nil {
				z.noExtra = map[string]bool{}
			}
			z.noExtra[e.Name] = true // the workspace may have a file of that name
			continue
		}
		if err != nil {
			z.leftOut(e.Name, "could not be made: "+err.Error())
			continue
		}
		fh := &zip.FileHeader{Name: e.Name, Method: zip.Deflate, Modified: time.Now()}
		fh.SetMode(0o644)
		w, err := z.zw.CreateHeader(fh)
		if err == nil {
			_, err = io.Copy(w, rc)
		}
		rc.Close()
		if err != nil {
			return err
		}
		if e.Cut != nil {
			if why := e.Cut(); why != "" {
				z.note(Note{Path: e.Name, Entry: e.Name, Why: why})
			}
		}
	}
	return nil
}
