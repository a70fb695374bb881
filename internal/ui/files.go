package ui

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/ignore"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/workspace"
)

// The job page's Files tab: the job's workspace as a tree, one directory
// a request, and a viewer that highlights a file on the server.
// Everything is read through the workspace's os.Root, so no name, ".." or
// link reaches outside it; links are listed as links and never followed.
// A running job's workspace is read from a snapshot the service takes
// (jobs.Service.Workspace), never the live one: a running sandbox could
// swap a file for a link between a check and a read. What the
// workspace's .gitignore and the common caches would leave out is left
// out of the tree unless asked (?all=1).

// Limits of the Files tab.
const (
	// MaxTreeEntries caps the entries listed of one directory.
	MaxTreeEntries = 1000
	// MaxViewBytes caps the bytes of a file the viewer shows.
	MaxViewBytes = 1 << 20
	// MaxViewLines caps its lines: a MiB of empty lines would be a
	// million rows, 80 MB of HTML the browser freezes on.
	MaxViewLines = 20000
)

// A path the tabs cannot show is the client's mistake (the API's 400):
// not clean and relative, or not a directory or file of the workspace.
var errBadPath = fmt.Errorf("%w: the path must be relative to the workspace, without '.' or '..' segments", store.ErrInvalid)

// treeEntry is one entry of a directory listing.
type treeEntry struct {
	Name, Path string
	Kind       string // "dir", "file", "link" or another file type
	Target     string // a link's target, as written
}

// treeData is a directory listing.
type treeData struct {
	Path    string // "" for the root
	Entries []treeEntry
	Cut     bool // more than MaxTreeEntries entries
	// Hidden counts the entries left out as ignored or caches; All says
	// none were.
	Hidden int
	All    bool
	// SnapshotAt is when a running job's snapshot was taken, as a time
	// of day; "" for an ended job.
	SnapshotAt string
}

// viewData is a file as the viewer shows it.
type viewData struct {
	Path, Download string
	Size           int64
	Binary, Cut    bool
	highlighted
}

// viewLine is a line of a viewed file: its number and tokens.
type viewLine struct {
	N      int
	Tokens []token
}

// token is a highlighted piece of a line: its text and chroma's class.
type token struct{ Class, Text string }

// cleanPath checks a tree or view path: "" is the workspace itself.
func cleanPath(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if !fs.ValidPath(p) {
		return "", fmt.Errorf("%w: %q", errBadPath, p)
	}
	if len(p) > workspace.MaxPathBytes {
		return "", fmt.Errorf("%w: the path is %d bytes, and a path has at most %d; download the zip for what lies deeper", store.ErrInvalid, len(p), workspace.MaxPathBytes)
	}
	return p, nil
}

// root opens the request's job's workspace (a running job's snapshot,
// held until the request ends), and says when a snapshot was taken.
func (u *UI) root(r *http.Request) (*os.Root, time.Time, error) {
	id := r.PathValue("id")
	ws, err := u.svc.Workspace(r.Context(), id)
	if err != nil {
		return nil, time.Time{}, err
	}
	root, err := ws.Open(r.Context(), id)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("open workspace: %w", err)
	}
	var at time.Time
	if sn, ok := ws.(jobs.Snapshot); ok {
		at = sn.TakenAt()
	}
	return root, at, nil
}

// Tree serves GET /ui/jobs/{id}/tree?path=DIR[&all=1]: one directory of
// the job's workspace, directories first, without what .gitignore and
// the common caches would leave out unless all.
func (u *UI) Tree(w http.ResponseWriter, r *http.Request) error {
	all := r.URL.Query().Get("all") == "1"
	return u.serveWorkspace(w, r, "tree", func(root *os.Root, p string, at time.Time) (any, error) {
		d, err := listTree(root, p, all)
		if !at.IsZero() {
			d.SnapshotAt = at.Local().Format("15:04:05")
		}
		return d, err
	})
}

// serveWorkspace renders the fragment name with what read makes of the
// request's path in its job's workspace.
func (u *UI) serveWorkspace(w http.ResponseWriter, r *http.Request, name string, read func(*os.Root, string, time.Time) (any, error)) error {
	p, err := cleanPath(r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	root, at, err := u.root(r)
	if err != nil {
		return err
	}
	defer root.Close()
	d, err := read(root, p, at)
	if err != nil {
		return err
	}
	return u.fragment(w, "job", name, d)
}

// listTree lists dir of root, up to MaxTreeEntries entries, directories
// first; without all, what the .gitignore files and the common caches
// would leave out is counted instead.
func listTree(root *os.Root, dir string, all bool) (treeData, error) {
	d := treeData{Path: dir, All: all}
	if dir == "." {
		d.Path = ""
	}
	var hide func(string, bool) bool
	if !all {
		hide = ignore.Load(root, dir).Hidden
	}
	l, err := workspace.List(root, dir, MaxTreeEntries, hide)
	if errors.Is(err, workspace.ErrNotDir) {
		return d, fmt.Errorf("%w: %s is not a directory of the workspace", store.ErrInvalid, dir)
	}
	if err != nil {
		return d, err
	}
	d.Cut, d.Hidden = l.Truncated, l.Hidden
	for _, e := range l.Entries {
		te := treeEntry{Name: e.Name, Path: e.Path, Kind: e.Type, Target: e.Target}
		if te.Kind == "symlink" {
			te.Kind = "link"
		}
		d.Entries = append(d.Entries, te)
	}
	slices.SortStableFunc(d.Entries, func(a, b treeEntry) int {
		switch {
		case a.Kind == "dir" && b.Kind != "dir":
			return -1
		case a.Kind != "dir" && b.Kind == "dir":
			return 1
		}
		return 0
	})
	return d, nil
}

// View serves GET /ui/jobs/{id}/view?path=FILE: a regular file of the
// ended job's workspace, highlighted, its first MaxViewBytes; a binary
// file as its size and a download link.
func (u *UI) View(w http.ResponseWriter, r *http.Request) error {
	return u.serveWorkspace(w, r, "file-view", func(root *os.Root, p string, _ time.Time) (any, error) {
		d, text, err := readView(root, p)
		d.Download = "/v1/jobs/" + url.PathEscape(r.PathValue("id")) + "/files/" + escapePath(p)
		if err == nil && !d.Binary {
			d.highlighted = u.hl.highlight(r.Context(), p, text)
		}
		return d, err
	})
}

// readView reads file p of root: the viewer's data but its lines, and
// the text they are to be made of. A link is followed only within the
// workspace (os.Root).
func readView(root *os.Root, p string) (viewData, string, error) {
	d := viewData{Path: p}
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return d, "", fmt.Errorf("%w: %s is not a file of the workspace", store.ErrInvalid, p)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		return d, "", fmt.Errorf("%w: %s is not a regular file", store.ErrInvalid, p)
	}
	d.Size = info.Size()
	b, err := io.ReadAll(io.LimitReader(f, MaxViewBytes+1))
	if err != nil {
		return d, "", fmt.Errorf("read %s: %w", p, err)
	}
	if len(b) > MaxViewBytes {
		b, d.Cut = b[:MaxViewBytes], true
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			b = b[:i+1]
		}
	}
	b, d.Cut = cutLines(b, MaxViewLines, d.Cut)
	d.Binary = binary(b, d.Cut)
	return d, string(b), nil
}

// binary reports whether b looks like anything but UTF-8 text. A cut
// file's last rune may be cut too.
func binary(b []byte, cut bool) bool {
	if bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
		return true
	}
	if cut {
		for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.Valid(b); i++ {
			b = b[:len(b)-1]
		}
	}
	return !utf8.Valid(b)
}

// cutLines keeps the first n lines of b, and reports whether anything
// was left out, then or before (cut).
func cutLines(b []byte, n int, cut bool) ([]byte, bool) {
	for i, end := 0, 0; i < n; i++ {
		j := bytes.IndexByte(b[end:], '\n')
		if j < 0 {
			return b, cut
		}
		end += j + 1
		if i == n-1 && end < len(b) {
			return b[:end], true
		}
	}
	return b, cut
}

// escapePath escapes each segment of a slash-separated path for a URL.
func escapePath(p string) string {
	seg := strings.Split(p, "/")
	for i, s := range seg {
		seg[i] = url.PathEscape(s)
	}
	return strings.Join(seg, "/")
}
