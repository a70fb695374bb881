package api

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"syscall"

	"github.com/agentbox/agentbox/internal/artifact"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
	"github.com/agentbox/agentbox/internal/workspace"
)

// openFlags opens workspace files without blocking on a FIFO the agent may
// have left behind.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK

// file handles GET /v1/jobs/{id}/files/{path...}: one regular file of an
// ended job's workspace. Every access goes through os.Root, so neither
// "..", an absolute path nor a symlink can reach outside the workspace.
func (s *server) file(w http.ResponseWriter, r *http.Request) error {
	p := r.PathValue("path")
	if !fs.ValidPath(p) || p == "." {
		return badRequest("file path must be relative to the workspace, without '.' or '..' segments")
	}
	ws, err := s.workspace(r)
	if err != nil {
		return err
	}
	root, err := ws.Open(r.Context(), pathID(r))
	if err != nil {
		return fmt.Errorf("open workspace: %w", err)
	}
	defer root.Close()
	f, err := root.OpenFile(p, openFlags, 0)
	if err != nil {
		return errNoFile
	}
	defer f.Close()
	info, err := f.Stat()
	switch {
	case err != nil:
		return errNoFile
	case info.IsDir():
		return badRequest("%s is a directory; download artifacts.zip for the whole workspace", p)
	case !info.Mode().IsRegular():
		return badRequest("%s is not a regular file", p)
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	http.ServeContent(w, r, "", info.ModTime(), f)
	return nil
}

// artifacts handles GET /v1/jobs/{id}/artifacts.zip: the ended job's whole
// workspace as a zip, streamed and bounded by the artifact package: links
// inside kept as links, links out, sparse files, devices, sockets and FIFOs
// left out, names made safe, and AGENTBOX-OMITTED.txt saying what and why;
// the job's diff at its root as agentbox.diff.
func (s *server) artifacts(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.workspace(r); err != nil {
		return err
	}
	id := pathID(r)
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": id + ".zip"}))
	cw := &countWriter{w: w}
	_, err := s.svc.Artifacts(r.Context(), id, cw, artifact.Options{Skip: func(name string, err error) {
		s.log.Warn("artifacts: skipping unreadable entry", "job_id", id, "path", name, "err", err)
	}})
	return s.endStream(r, cw, "artifacts: zip stream failed", err)
}

// endStream ends a streamed answer that err ended: an error answer if
// nothing was sent yet (the workspace removed since the check), else a
// cut connection, so that the client does not take what it got for whole.
func (s *server) endStream(r *http.Request, cw *countWriter, what string, err error) error {
	switch {
	case err == nil:
		return nil
	case cw.n == 0:
		return err
	case r.Context().Err() == nil:
		s.log.Error(what, "job_id", pathID(r), "err", err)
	}
	panic(http.ErrAbortHandler)
}

// countWriter counts what is written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// diff handles GET /v1/jobs/{id}/diff: what the ended job changed against
// where it started, as a unified diff, or with ?format=patch as git
// format-patch output (repository jobs). Streamed as git writes it.
func (s *server) diff(w http.ResponseWriter, r *http.Request) error {
	patch := false
	switch f := r.URL.Query().Get("format"); f {
	case "", "diff":
	case "patch":
		patch = true
	default:
		return badRequest("format %q: want diff (the default) or patch", f)
	}
	h := w.Header()
	h.Set("Content-Type", "text/x-diff; charset=utf-8")
	if patch {
		h.Set("Content-Type", "text/x-patch; charset=utf-8")
	}
	h.Set("X-Content-Type-Options", "nosniff")
	cw := &countWriter{w: w}
	return s.endStream(r, cw, "diff stream failed", s.svc.Diff(r.Context(), pathID(r), patch, cw))
}

// workspace checks that the request's job has a workspace to read and
// returns the store holding it.
func (s *server) workspace(r *http.Request) (workspace.Store, error) {
	ws, err := s.svc.Workspace(r.Context(), pathID(r))
	if errors.Is(err, store.ErrNotFound) {
		if _, gerr := s.svc.Get(r.Context(), pathID(r)); gerr == nil {
			return nil, errorf(http.StatusNotFound, wire.CodeNotFound, "job %s has no workspace: it ended before its sandbox started", pathID(r))
		}
	}
	return ws, err
}
