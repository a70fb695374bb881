package artifact

import (
	"archive/zip"
	"io"
	"time"
)

// Extra is a file of agentbox's own a zip holds at its root, beside the
// workspace's entries (agentbox.diff): a workspace entry of the same name
// is stored under another, as for the manifest.
type Extra struct {
	Name string
	// Open returns the file's content, which the zip reads to its end and
	// closes. An error leaves the file out, noted in the manifest.
	Open func() (io.ReadCloser, error)
}

// reserved are the names the zip keeps at its root for its own files.
func (z *zipper) reserved() []string {
	names := []string{ManifestName}
	for _, e := range z.opts.Extra {
		names = append(names, e.Name)
	}
	return names
}

// isExtra reports whether name is one of the zip's extra files.
func (z *zipper) isExtra(name string) bool {
	for _, e := range z.opts.Extra {
		if foldName(e.Name) == foldName(name) {
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
	}
	return nil
}
