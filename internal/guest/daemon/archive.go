package daemon

import (
	"archive/tar"
	"archive/zip"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/guest"
)

// archiver writes one entry of a workspace archive.
type archiver interface {
	add(name string, fi fs.FileInfo, target string, body io.Reader) error
	Close() error
}

// archive streams the directory named by path as a zip or tar. Symlinks are
// stored as links, never followed; entry names are relative to the directory.
func (s *Server) archive(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rel, err := s.rel(q.Get("path"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	format := q.Get("format")
	if format == "" {
		format = "zip"
	}
	if format != "zip" && format != "tar" {
		s.writeError(w, guest.Errorf(guest.CodeBadRequest, "archive: format %q: want zip or tar", format))
		return
	}
	fi, err := s.root.Stat(rel)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if !fi.IsDir() {
		s.writeError(w, guest.Errorf(guest.CodeNotDir, "%s: not a directory", display(rel)))
		return
	}
	w.Header().Set("Content-Type", "application/"+format)
	var a archiver = &tarArchiver{tar.NewWriter(w)}
	if format == "zip" {
		a = &zipArchiver{zip.NewWriter(w)}
	}
	if err := s.walkArchive(rel, a); err != nil {
		// Headers are sent: aborting the response (no final chunk) is how the
		// client learns the archive is incomplete.
		s.log.Warn("archive failed", "path", rel, "err", err)
		panic(http.ErrAbortHandler)
	}
	_ = a.Close()
}

func (s *Server) walkArchive(rel string, a archiver) error {
	base := filepath.ToSlash(rel)
	return fs.WalkDir(s.root.FS(), base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return skipUnreadable(p, base, err)
		}
		if p == base {
			return nil
		}
		name := strings.TrimPrefix(p, base+"/")
		if base == "." {
			name = p
		}
		fi, err := d.Info()
		if err != nil {
			return nil // vanished while walking
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := s.root.Readlink(p)
			if err != nil {
				return err
			}
			return a.add(name, fi, target, nil)
		case fi.Mode().IsRegular():
			f, fi, err := s.openRegular(p, os.O_RDONLY)
			if err != nil {
				return err
			}
			defer f.Close()
			return a.add(name, fi, "", io.LimitReader(f, fi.Size()))
		case fi.IsDir():
			return a.add(name+"/", fi, "", nil)
		}
		return nil // sockets, fifos, devices: not archived
	})
}

type zipArchiver struct{ *zip.Writer }

func (z *zipArchiver) add(name string, fi fs.FileInfo, target string, body io.Reader) error {
	h, err := zip.FileInfoHeader(fi)
	if err != nil {
		return err
	}
	h.Name = name
	if body != nil {
		h.Method = zip.Deflate
	}
	w, err := z.CreateHeader(h)
	if err != nil {
		return err
	}
	if target != "" {
		_, err = io.WriteString(w, target)
		return err
	}
	if body != nil {
		_, err = io.Copy(w, body)
	}
	return err
}

type tarArchiver struct{ *tar.Writer }

func (t *tarArchiver) add(name string, fi fs.FileInfo, target string, body io.Reader) error {
	h, err := tar.FileInfoHeader(fi, target)
	if err != nil {
		return err
	}
	h.Name = name
	h.Uname, h.Gname = "", ""
	if err := t.WriteHeader(h); err != nil {
		return err
	}
	if body != nil {
		_, err = io.Copy(t, body)
	}
	return err
}
