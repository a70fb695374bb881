package daemon

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentbox/agentbox/internal/guest"
)

// rel turns a user-supplied path into a path relative to the workspace root,
// refusing anything that leaves it lexically. Symlinks that lead out are
// refused later by the workspace root, which every file operation goes
// through (workspaceRoot).
func (s *Server) rel(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if strings.ContainsRune(p, 0) {
		return "", guest.Errorf(guest.CodeBadRequest, "path contains a NUL byte")
	}
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(s.cfg.Workspace, filepath.Clean(p))
		if err != nil || !filepath.IsLocal(r) && r != "." {
			return "", guest.Errorf(guest.CodePathEscape, "path %q is outside the workspace %s", p, s.cfg.Workspace)
		}
		return r, nil
	}
	c := filepath.Clean(p)
	if c != "." && !filepath.IsLocal(c) {
		return "", guest.Errorf(guest.CodePathEscape, "path %q is outside the workspace %s", p, s.cfg.Workspace)
	}
	return c, nil
}

// display is how a workspace-relative path is shown back to callers.
func display(rel string) string { return path.Clean(filepath.ToSlash(rel)) }

// classify turns an error from a file operation into a protocol error.
func (s *Server) classify(err error) *guest.Error {
	var e *guest.Error
	if errors.As(err, &e) {
		return e
	}
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Op + " " + display(pe.Path) + ": " + pe.Err.Error()
	}
	switch {
	case isEscape(err):
		return guest.Errorf(guest.CodePathEscape, "%s: a symlink or path leads outside the workspace %s", pathOf(err), s.cfg.Workspace)
	case errors.Is(err, fs.ErrNotExist):
		return guest.Errorf(guest.CodeNotFound, "%s: no such file or directory", pathOf(err))
	case errors.Is(err, fs.ErrExist):
		return guest.Errorf(guest.CodeExists, "%s: already exists", pathOf(err))
	case errors.Is(err, syscall.EISDIR):
		return guest.Errorf(guest.CodeIsDir, "%s: is a directory", pathOf(err))
	case errors.Is(err, syscall.ENOTDIR):
		return guest.Errorf(guest.CodeNotDir, "%s: not a directory", pathOf(err))
	case errors.Is(err, syscall.ENOTEMPTY):
		return guest.Errorf(guest.CodeExists, "%s: directory not empty (delete with recursive)", pathOf(err))
	case errors.Is(err, fs.ErrPermission):
		return guest.Errorf(guest.CodeBadRequest, "%s: permission denied", pathOf(err))
	}
	return guest.Errorf(guest.CodeInternal, "%s", msg)
}

// isEscape recognises the refusal to follow a path out of the root: the
// workspace root's or os.Root's. The standard library does not export its
// error value; the guest's tests pin the text so a change is caught.
func isEscape(err error) bool {
	return errors.Is(err, errEscape) || strings.Contains(err.Error(), errEscape.Error())
}

func pathOf(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return display(pe.Path)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return display(le.Old) + " -> " + display(le.New)
	}
	return "path"
}
