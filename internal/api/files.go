package api

import (
	"errors"
	"fmt"
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
// left out, names made safe, and AGENTBOX-OMITTED.txt saying what and why.
func (s *server) artifacts(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.workspace(r)
	if err != nil {
		return err
	}
	id := pathID(r)
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": id + ".zip"}))
	_, err = ws.Zip(r.Context(), id, w, artifact.Options{Skip: func(name string, err error) {
		s.log.Warn("artifacts: skipping unreadable entry", "job_id", id, "path", name, "err", err)
	}})
	if errors.Is(err, workspace.ErrNotFound) { // removed since the check; nothing was written
		return fmt.Errorf("open workspace: %w", err)
	}
	if err != nil {
		if r.Context().Err() == nil {
			s.log.Error("artifacts: zip stream failed", "job_id", id, "err", err)
		}
		panic(http.ErrAbortHandler) // cut the connection: the client must not take a truncated zip for whole
	}
	return nil
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
