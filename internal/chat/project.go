package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox/agentbox/internal/workspace"
)

// Project is the person's directory a session works on (chat
// --workspace DIR): a copy of it, made when the session starts, in the
// session's own workspace; or with InPlace the directory itself.
type Project struct {
	// Dir is the directory, resolved (workspace.ProjectDir); "" for a
	// session with a workspace of its own, empty at first.
	Dir     string `json:"dir,omitempty"`
	InPlace bool   `json:"in_place,omitempty"`
}

// String says what a session with p works on, for listings.
func (p Project) String() string {
	switch {
	case p.Dir == "":
		return "its own"
	case p.InPlace:
		return p.Dir + " (in place)"
	}
	return "copy of " + p.Dir
}

// phrase says what a session with p works on, in a sentence.
func (p Project) phrase() string {
	switch {
	case p.Dir == "":
		return "a workspace of its own"
	case p.InPlace:
		return p.Dir + " itself"
	}
	return "a copy of " + p.Dir
}

// metaFile is a session's small record beside its history: what it works
// on, for resuming it, and what a listing shows.
const metaFile = "session.json"

// meta is what metaFile holds.
type meta struct {
	Project Project `json:"project"`
	// Last is the user's last message, one line, cut.
	Last string `json:"last,omitempty"`
	// Saved is when the session was last saved.
	Saved time.Time `json:"saved"`
}

// maxMetaBytes bounds the metaFile read: it is small, but a file of the
// data dir is not trusted to be.
const maxMetaBytes = 64 << 10

// lastLen bounds a session's last message as saved and listed, in runes.
const lastLen = 60

// loadMeta reads the record of the session in dir; ok is false when the
// session was never saved (no record, no history, no workspace). A
// session saved before records were kept has a zero one.
func loadMeta(dir string) (m meta, ok bool, err error) {
	b, err := readBounded(filepath.Join(dir, metaFile), maxMetaBytes)
	if err == nil {
		if err := json.Unmarshal(b, &m); err != nil {
			return m, true, fmt.Errorf("session %s: %s: %w", filepath.Base(dir), metaFile, err)
		}
		return m, true, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return m, false, err
	}
	for _, name := range []string{"history.json", "workspace"} {
		if fi, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			return meta{Saved: fi.ModTime()}, true, nil
		}
	}
	return m, false, nil
}

// readBounded reads the file at path if it holds at most max bytes.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > max {
		return nil, fmt.Errorf("%s: not a file of at most %d bytes", path, max)
	}
	b := make([]byte, max+1)
	n, err := f.Read(b)
	if n > int(max) {
		return nil, fmt.Errorf("%s: over %d bytes", path, max)
	}
	if n > 0 {
		err = nil
	}
	return b[:n], err
}

// writeMeta writes the record of the session in dir atomically.
func writeMeta(dir string, m meta) error {
	b, _ := json.MarshalIndent(m, "", " ")
	tmp := filepath.Join(dir, "."+metaFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, metaFile))
}

// workspaceFor decides what session name, in dir, works on, and readies
// it: a saved session what it was started on (want, if given, must be
// the same), a new one want, a copy of which it makes now. It returns
// the host directory the sandbox mounts and whether it is the session's
// own (a copy, or an empty start) rather than the person's.
func (s *Session) workspaceFor(ctx context.Context, name string, saved *meta, want Project) (ws string, own bool, err error) {
	if want.Dir, err = workspace.ProjectDir(want.Dir, s.cfg.DataDir, want.InPlace); err != nil {
		return "", false, err
	}
	p := want
	if saved != nil {
		if p, err = resumed(name, saved.Project, want, s.cfg.DataDir); err != nil {
			return "", false, err
		}
	}
	s.project = p
	if p.InPlace {
		return p.Dir, false, nil
	}
	if p.Dir != "" && saved == nil {
		s.notCopied, err = workspace.CopyProject(p.Dir, func(root *os.Root) ([]string, error) {
			return s.ws.Copy(ctx, name, root, workspace.Limits{MaxBytes: s.cfg.MaxCopy})
		})
		if err != nil {
			return "", false, err
		}
	}
	ws, err = s.ws.Prepare(ctx, name)
	if err != nil {
		return "", false, fmt.Errorf("session dir: %w", err)
	}
	if p.Dir != "" && saved != nil {
		if _, err := os.Stat(p.Dir); err != nil {
			fmt.Fprintf(s.cfg.Err, "note: %s, which this session's workspace is a copy of, is gone; the copy goes on\n", p.Dir)
		}
	}
	return ws, true, nil
}

// resumed is the project of saved session name, which had p: want, when
// given, must be p. In place, the directory must still be one a session
// may work in (workspace.ProjectDir).
func resumed(name string, p, want Project, dataDir string) (Project, error) {
	if want.Dir != "" && want != p {
		return p, fmt.Errorf("session %s works on %s, not on %s: leave --workspace out to resume it, or name another session (--session NEW) for %s",
			name, p.phrase(), want.phrase(), want.Dir)
	}
	if !p.InPlace {
		return p, nil
	}
	if _, err := os.Stat(p.Dir); errors.Is(err, fs.ErrNotExist) {
		return p, fmt.Errorf("session %s works in %s itself, which is gone (moved or removed?): bring it back there, or start another session", name, p.Dir)
	}
	dir, err := workspace.ProjectDir(p.Dir, dataDir, true)
	if err != nil {
		return p, fmt.Errorf("session %s works in %s itself: %w", name, p.Dir, err)
	}
	p.Dir = dir
	return p, nil
}
