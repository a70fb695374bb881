package daemon

import (
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/agentbox/agentbox/internal/guest"
)

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	rel, err := s.rel(r.URL.Query().Get("path"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	offset, limit, err := readRange(r, s.cfg.MaxReadBytes)
	if err != nil {
		s.writeError(w, err)
		return
	}
	f, fi, err := s.openRegular(rel, os.O_RDONLY)
	if err != nil {
		s.writeError(w, err)
		return
	}
	defer f.Close()
	if limit == 0 && fi.Size()-offset > s.cfg.MaxReadBytes {
		s.writeError(w, guest.Errorf(guest.CodeTooLarge, "%s: %d bytes is over the read limit of %d; read it in ranges", display(rel), fi.Size(), s.cfg.MaxReadBytes))
		return
	}
	if limit == 0 {
		limit = s.cfg.MaxReadBytes
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-File-Size", strconv.FormatInt(fi.Size(), 10))
	_, _ = io.Copy(w, io.NewSectionReader(f, offset, limit))
}

func readRange(r *http.Request, max int64) (offset, limit int64, err error) {
	q := r.URL.Query()
	for _, v := range []struct {
		name string
		dst  *int64
	}{{"offset", &offset}, {"limit", &limit}} {
		s := q.Get(v.name)
		if s == "" {
			continue
		}
		n, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil || n < 0 {
			return 0, 0, guest.Errorf(guest.CodeBadRequest, "%s %q: want a non-negative integer", v.name, s)
		}
		*v.dst = n
	}
	if limit > max {
		return 0, 0, guest.Errorf(guest.CodeTooLarge, "limit %d is over the read limit of %d", limit, max)
	}
	return offset, limit, nil
}

// writeFile writes the body to a temporary file next to the target and
// renames it into place, so a reader never sees half a file.
func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rel, err := s.rel(q.Get("path"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	if rel == "." {
		s.writeError(w, guest.Errorf(guest.CodeIsDir, "write: path is the workspace itself"))
		return
	}
	mode := os.FileMode(0o644)
	if m := q.Get("mode"); m != "" {
		n, err := strconv.ParseUint(m, 8, 32)
		if err != nil || n > 0o777 {
			s.writeError(w, guest.Errorf(guest.CodeBadRequest, "mode %q: want octal permissions such as 644", m))
			return
		}
		mode = os.FileMode(n)
	}
	info, err := s.write(w, r, rel, mode)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) write(w http.ResponseWriter, r *http.Request, rel string, mode os.FileMode) (guest.FileInfo, error) {
	if dir := filepath.Dir(rel); dir != "." {
		if err := s.root.MkdirAll(dir, 0o755); err != nil {
			return guest.FileInfo{}, err
		}
	}
	if fi, err := s.root.Lstat(rel); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return s.writeThrough(w, r, rel, mode)
	}
	tmp := filepath.Join(filepath.Dir(rel), ".agentbox-"+rand.Text()[:16]+".tmp")
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return guest.FileInfo{}, err
	}
	_, err = io.Copy(f, http.MaxBytesReader(w, r.Body, s.cfg.MaxWriteBytes))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.root.Chmod(tmp, mode) // the umask may have narrowed it
	}
	if err == nil {
		err = s.root.Rename(tmp, rel)
	}
	if err != nil {
		_ = s.root.Remove(tmp)
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return guest.FileInfo{}, guest.Errorf(guest.CodeTooLarge, "%s: over the write limit of %d bytes", display(rel), s.cfg.MaxWriteBytes)
		}
		return guest.FileInfo{}, err
	}
	return s.stat(rel)
}

// writeThrough writes to the target of the symlink rel, in place; os.Root
// refuses a link that leads out of the workspace.
func (s *Server) writeThrough(w http.ResponseWriter, r *http.Request, rel string, mode os.FileMode) (guest.FileInfo, error) {
	f, _, err := s.openRegular(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return guest.FileInfo{}, err
	}
	_, err = io.Copy(f, http.MaxBytesReader(w, r.Body, s.cfg.MaxWriteBytes))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return guest.FileInfo{}, guest.Errorf(guest.CodeTooLarge, "%s: over the write limit of %d bytes", display(rel), s.cfg.MaxWriteBytes)
	}
	if err != nil {
		return guest.FileInfo{}, err
	}
	return s.stat(rel)
}

// openRegular opens a regular file without blocking: opening a FIFO for
// reading blocks until a writer comes, which would hang the guest.
func (s *Server) openRegular(rel string, flag int, perm ...os.FileMode) (*os.File, fs.FileInfo, error) {
	mode := os.FileMode(0o644)
	if len(perm) > 0 {
		mode = perm[0]
	}
	f, err := s.root.OpenFile(rel, flag|syscall.O_NONBLOCK, mode)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		if fi.IsDir() {
			return nil, nil, guest.Errorf(guest.CodeIsDir, "%s: is a directory", display(rel))
		}
		return nil, nil, guest.Errorf(guest.CodeBadRequest, "%s: not a regular file", display(rel))
	}
	return f, fi, nil
}

func (s *Server) statFile(w http.ResponseWriter, r *http.Request) {
	rel, err := s.rel(r.URL.Query().Get("path"))
	if err == nil {
		var info guest.FileInfo
		if info, err = s.stat(rel); err == nil {
			writeJSON(w, http.StatusOK, info)
			return
		}
	}
	s.writeError(w, err)
}

func (s *Server) stat(rel string) (guest.FileInfo, error) {
	fi, err := s.root.Lstat(rel)
	if err != nil {
		return guest.FileInfo{}, err
	}
	return s.info(rel, fi), nil
}

func (s *Server) info(rel string, fi fs.FileInfo) guest.FileInfo {
	out := guest.FileInfo{Path: display(rel), Size: fi.Size(), Mode: uint32(fi.Mode().Perm()), ModTime: fi.ModTime().UTC()}
	switch {
	case fi.Mode().IsRegular():
		out.Type = "file"
	case fi.IsDir():
		out.Type, out.Size = "dir", 0
	case fi.Mode()&fs.ModeSymlink != 0:
		out.Type = "symlink"
		out.Target, _ = s.root.Readlink(rel)
	default:
		out.Type = "other"
	}
	return out
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rel, err := s.rel(q.Get("path"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	max := 10000
	if m := q.Get("max"); m != "" {
		if max, err = strconv.Atoi(m); err != nil || max <= 0 || max > 100000 {
			s.writeError(w, guest.Errorf(guest.CodeBadRequest, "max %q: want 1 to 100000", m))
			return
		}
	}
	l, err := s.list(rel, q.Get("recursive") == "1" || q.Get("recursive") == "true", max)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// errStop ends a walk early once enough entries were found.
var errStop = errors.New("stop")

func (s *Server) list(rel string, recursive bool, max int) (guest.Listing, error) {
	fi, err := s.root.Stat(rel)
	if err != nil {
		return guest.Listing{}, err
	}
	if !fi.IsDir() {
		return guest.Listing{}, guest.Errorf(guest.CodeNotDir, "%s: not a directory", display(rel))
	}
	l := guest.Listing{Entries: []guest.FileInfo{}}
	err = fs.WalkDir(s.root.FS(), filepath.ToSlash(rel), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return skipUnreadable(p, rel, err)
		}
		if p == filepath.ToSlash(rel) {
			return nil
		}
		if len(l.Entries) >= max {
			l.Truncated = true
			return errStop
		}
		fi, err := d.Info()
		if err != nil {
			return nil // vanished while walking
		}
		l.Entries = append(l.Entries, s.info(p, fi))
		if d.IsDir() && !recursive {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return guest.Listing{}, err
	}
	return l, nil
}

func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rel, err := s.rel(q.Get("path"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	if rel == "." {
		s.writeError(w, guest.Errorf(guest.CodeBadRequest, "delete: refusing to delete the workspace itself"))
		return
	}
	if _, err := s.root.Lstat(rel); err != nil {
		s.writeError(w, err)
		return
	}
	if q.Get("recursive") == "1" || q.Get("recursive") == "true" {
		err = s.root.RemoveAll(rel)
	} else {
		err = s.root.Remove(rel)
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) moveFile(w http.ResponseWriter, r *http.Request) {
	var req guest.MoveRequest
	if err := decode(w, r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	info, err := s.move(req)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) move(req guest.MoveRequest) (guest.FileInfo, error) {
	from, err := s.rel(req.From)
	if err != nil {
		return guest.FileInfo{}, err
	}
	to, err := s.rel(req.To)
	if err != nil {
		return guest.FileInfo{}, err
	}
	if from == "." || to == "." {
		return guest.FileInfo{}, guest.Errorf(guest.CodeBadRequest, "move: cannot move the workspace itself")
	}
	if _, err := s.root.Lstat(from); err != nil {
		return guest.FileInfo{}, err
	}
	if _, err := s.root.Lstat(to); err == nil && !req.Overwrite {
		return guest.FileInfo{}, guest.Errorf(guest.CodeExists, "%s: already exists (set overwrite)", display(to))
	}
	if dir := path.Dir(filepath.ToSlash(to)); dir != "." {
		if err := s.root.MkdirAll(dir, 0o755); err != nil {
			return guest.FileInfo{}, err
		}
	}
	if err := s.root.Rename(from, to); err != nil {
		return guest.FileInfo{}, err
	}
	return s.stat(to)
}

// skipUnreadable lets a walk go past a subdirectory it may not read (the
// agent can chmod 000 one) instead of failing the whole listing.
func skipUnreadable(p, root string, err error) error {
	if p != filepath.ToSlash(root) && errors.Is(err, fs.ErrPermission) {
		return fs.SkipDir
	}
	return err
}
