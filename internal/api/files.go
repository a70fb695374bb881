package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/agentbox/agentbox/internal/artifact"
	"github.com/agentbox/agentbox/internal/ignore"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
	"github.com/agentbox/agentbox/internal/workspace"
)

// openFlags opens workspace files without blocking on a FIFO the agent may
// have left behind.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK

// maxListEntries bounds the entries one directory listing gives.
const maxListEntries = 1000

// file handles GET /v1/jobs/{id}/files/{path...}: one regular file of the
// job's workspace, or with ?list (or a path ending in '/', the root's
// empty one among them) one directory of it as a wire.FileList. A running
// job's are read from a snapshot of its workspace (jobs.Service.Workspace),
// never the live one. Every access goes through os.Root, so neither "..",
// an absolute path nor a symlink can reach outside the workspace; a
// listing follows no link at all.
func (s *server) file(w http.ResponseWriter, r *http.Request) error {
	p := r.PathValue("path")
	list := r.URL.Query().Has("list") || p == "" || strings.HasSuffix(p, "/")
	if p = strings.TrimSuffix(p, "/"); p == "" {
		p = "."
	}
	if !fs.ValidPath(p) {
		return badRequest("file path must be relative to the workspace, without '.' or '..' segments")
	}
	if len(p) > workspace.MaxPathBytes {
		return badRequest("file path is %d bytes: a path has at most %d; download the zip (artifacts.zip) for what lies deeper", len(p), workspace.MaxPathBytes)
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
	if list {
		return s.listFiles(w, r, ws, root, p)
	}
	f, err := root.OpenFile(p, openFlags, 0)
	if err != nil {
		return noFile(root, p)
	}
	defer f.Close()
	info, err := f.Stat()
	switch {
	case err != nil:
		return errNoFile
	case info.IsDir():
		return badRequest("%s is a directory: list it with GET /v1/jobs/%s/files/%s/ (or ?list), or download the whole workspace with GET /v1/jobs/%s/artifacts.zip",
			p, pathID(r), p, pathID(r))
	case !info.Mode().IsRegular():
		return badRequest("%s is a %s, not a regular file: it has no content to download", p, workspace.TypeOf(info.Mode()))
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	http.ServeContent(w, r, "", info.ModTime(), f)
	return nil
}

// noFile says why path p of root could not be opened: a symlink on its
// way that leads out of the workspace (or nowhere) is named, with its
// target, since the zip holds the link itself; else there is no such file.
func noFile(root *os.Root, p string) error {
	for q := p; q != "."; q = path.Dir(q) {
		fi, err := root.Lstat(q)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		target, _ := root.Readlink(q)
		return errorf(http.StatusNotFound, wire.CodeNotFound,
			"%s is a symlink to %s, which is outside the workspace or missing: it is not followed; download the zip (artifacts.zip) to get the link itself", q, target)
	}
	return errNoFile
}

// listFiles answers a directory listing of p: the entries the
// workspace's .gitignore and the common caches would leave out are left
// out unless ?all=1.
func (s *server) listFiles(w http.ResponseWriter, r *http.Request, ws workspace.Store, root *os.Root, p string) error {
	var hide func(string, bool) bool
	if !allParam(r) {
		hide = ignore.Load(root, p).Hidden
	}
	l, err := workspace.List(root, p, maxListEntries, hide)
	if errors.Is(err, workspace.ErrNotDir) {
		if fi, lerr := root.Lstat(p); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := root.Readlink(p)
			return badRequest("%s is a symlink to %s: a listing follows no link; list the target's path if it is in the workspace, or download the zip", p, target)
		}
		if fi, lerr := root.Lstat(p); lerr == nil && !fi.IsDir() {
			return badRequest("%s is not a directory: download it with GET /v1/jobs/%s/files/%s", p, pathID(r), p)
		}
		return noFile(root, p)
	}
	if err != nil {
		return err
	}
	out := wire.FileList{Path: rootless(p), Entries: make([]wire.FileEntry, len(l.Entries)), Truncated: l.Truncated, Hidden: l.Hidden}
	for i, e := range l.Entries {
		out.Entries[i] = wire.FileEntry{Name: e.Name, Type: e.Type, Size: e.Size, Mode: fmt.Sprintf("%04o", uint32(e.Mode)), MTime: e.MTime.UTC(), Target: e.Target}
	}
	if sn, ok := ws.(jobs.Snapshot); ok {
		out.SnapshotAt = sn.TakenAt().UTC()
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// rootless is a workspace path as a listing names it: "" for the root.
func rootless(p string) string {
	if p == "." {
		return ""
	}
	return p
}

// allParam reports whether the request asks for everything (?all=1,
// ?all=true, or a bare ?all), ignored files and caches too.
func allParam(r *http.Request) bool {
	q := r.URL.Query()
	if !q.Has("all") {
		return false
	}
	v := q.Get("all")
	return v == "" || v == "1" || v == "true"
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
	all := allParam(r)
	da, canAll := s.svc.(diffAller)
	switch {
	case all && patch:
		return badRequest("all=1 is for the diff: a patch is the commit of the job's change, which leaves out what .gitignore ignores")
	case all && !canAll:
		return badRequest("this server gives no diff with ignored files (all=1)")
	}
	h := w.Header()
	h.Set("Content-Type", "text/x-diff; charset=utf-8")
	if patch {
		h.Set("Content-Type", "text/x-patch; charset=utf-8")
	}
	h.Set("X-Content-Type-Options", "nosniff")
	cw := &countWriter{w: w}
	if all {
		return s.endStream(r, cw, "diff stream failed", da.DiffAll(r.Context(), pathID(r), cw))
	}
	return s.endStream(r, cw, "diff stream failed", s.svc.Diff(r.Context(), pathID(r), patch, cw))
}

// diffAller gives a job's diff with what it leaves out by default (see
// jobs.Service.DiffAll): an ability of the Service found by type
// assertion.
type diffAller interface {
	DiffAll(ctx context.Context, id string, w io.Writer) error
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
