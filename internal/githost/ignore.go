package githost

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// errIgnorer is why asking which paths are ignored failed.
var errIgnorer = errors.New("git check-ignore")

// Bounds of the rules one walk copies: a sandbox can make thousands of
// .gitignore files, or hard links to one big one that cost its disk
// quota nothing, and each copy would cost the host's disk.
const (
	// maxIgnoreBytes bounds one .gitignore; a larger one is taken as absent.
	maxIgnoreBytes = 4 << 20
	// maxRuleBytes bounds what the shadow worktree of one walk holds: the
	// rule files copied into it and ruleDirBytes for each directory above
	// each of them. Rule files past it are taken as absent.
	maxRuleBytes = 32 << 20
	// ruleDirBytes is what a directory of the shadow worktree is charged:
	// a block.
	ruleDirBytes = 4 << 10
)

// ignorer answers which workspace paths .gitignore files ignore, with
// `git check-ignore` run on a shadow worktree: a host directory holding a
// copy of each .gitignore the walk met (regular files only), and nothing
// else. git never reads the workspace itself. Each file is read once
// (further paths of its inode are hard links to its copy), and past
// maxRuleBytes, or when git could not take its path, a .gitignore is
// taken as absent, with a note: what it would ignore is recorded.
type ignorer struct {
	h      *Host
	gitDir string
	shadow string
	root   *os.Root          // the shadow worktree, once a rule is copied
	copies map[fileID]string // the copy of each rule file read, by its inode
	left   int64             // of maxRuleBytes
	notes  *noteList         // where rules taken as absent are noted
	cmd    *exec.Cmd
	cancel context.CancelFunc
	in     io.WriteCloser
	out    *bufio.Reader
}

// fileID names a file by its inode.
type fileID struct{ dev, ino uint64 }

func (h *Host) newIgnorer(gitDir, tmp string, notes *noteList) *ignorer {
	return &ignorer{h: h, gitDir: gitDir, shadow: filepath.Join(tmp, "worktree"), copies: map[fileID]string{},
		left: maxRuleBytes, notes: notes}
}

// enter copies the .gitignore of workspace directory p (ents are its
// entries) into the shadow worktree, and reports whether there was one.
func (g *ignorer) enter(root *os.Root, p string, ents []fs.DirEntry) (bool, error) {
	for _, e := range ents {
		if e.Name() == ".gitignore" && e.Type().IsRegular() {
			return g.copy(root, path.Join(p, ".gitignore"))
		}
	}
	return false, nil
}

// copy puts the rule file name of the workspace into the shadow worktree,
// or notes why it is taken as absent. Only failing to make the shadow
// worktree is an error.
func (g *ignorer) copy(root *os.Root, name string) (bool, error) {
	if len(name) >= maxPathBytes {
		return g.absent(name, fmt.Sprintf("a path of %d bytes, longer than git takes", len(name)))
	}
	f, err := root.OpenFile(name, openFlags, 0)
	if err != nil {
		return g.absent(name, "unreadable")
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return g.absent(name, "unreadable")
	}
	if fi.Size() > maxIgnoreBytes {
		return g.absent(name, fmt.Sprintf("%d bytes, over the %d one .gitignore may hold", fi.Size(), maxIgnoreBytes))
	}
	if err := g.open(); err != nil {
		return false, err
	}
	id, linkable := idOf(fi)
	if first, ok := g.copies[id]; ok && linkable && g.charge(name, 0) == nil && g.root.Link(first, name) == nil {
		return true, nil
	}
	if err := g.charge(name, fi.Size()); err != nil {
		return g.absent(name, err.Error())
	}
	b, err := io.ReadAll(io.LimitReader(f, fi.Size()))
	if err != nil {
		return g.absent(name, "unreadable")
	}
	if err := g.root.WriteFile(name, b, 0o600); err != nil {
		return g.absent(name, "not copied: "+err.Error())
	}
	g.copies[id] = name
	return true, nil
}

// charge takes what a copy of size bytes at name costs the shadow
// worktree from what is left, and makes the directories above it. The
// directories are charged whether or not an earlier copy made them.
func (g *ignorer) charge(name string, size int64) error {
	cost := size + int64(len(name)) + int64(strings.Count(name, "/"))*ruleDirBytes
	if cost > g.left {
		return fmt.Errorf("over the %d bytes of .gitignore copies one tree makes", maxRuleBytes)
	}
	g.left -= cost
	if dir := path.Dir(name); dir != "." {
		if err := g.root.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("not copied: %w", err)
		}
	}
	return nil
}

// open makes the shadow worktree and opens it, once.
func (g *ignorer) open() error {
	if g.root != nil {
		return nil
	}
	if err := os.MkdirAll(g.shadow, 0o700); err != nil {
		return fmt.Errorf("ignore rules: %w", err)
	}
	root, err := os.OpenRoot(g.shadow)
	if err != nil {
		return fmt.Errorf("ignore rules: %w", err)
	}
	g.root = root
	return nil
}

// absent notes that rule file name is taken as absent, and why.
func (g *ignorer) absent(name, why string) (bool, error) {
	g.notes.add(short(name) + ": " + why)
	return false, nil
}

// idOf names fi's inode, if the system says which it is.
func idOf(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: st.Dev, ino: st.Ino}, true
}

// ignored reports whether the rules ignore path p (a directory if dir).
func (g *ignorer) ignored(p string, dir bool) (bool, error) {
	if g.cmd == nil {
		if err := g.start(); err != nil {
			return false, err
		}
	}
	if dir {
		p += "/"
	}
	if _, err := io.WriteString(g.in, p+"\x00"); err != nil {
		return false, g.failed(err)
	}
	// -v -n answers each path with source, line, pattern and path; the
	// source is empty when no pattern matched, and a pattern starting
	// with '!' re-includes the path.
	var f [4]string
	for i := range f {
		s, err := g.out.ReadString(0)
		if err != nil {
			return false, g.failed(err)
		}
		f[i] = strings.TrimSuffix(s, "\x00")
	}
	return f[0] != "" && !strings.HasPrefix(f[2], "!"), nil
}

func (g *ignorer) start() error {
	if err := os.MkdirAll(g.shadow, 0o700); err != nil {
		return fmt.Errorf("ignore rules: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.h.cfg.Timeout)
	cmd := g.h.command(ctx, "--work-tree="+g.shadow, "check-ignore", "--stdin", "-z", "-v", "-n", "--no-index")
	cmd.Env = g.h.env(run{gitDir: g.gitDir})
	cmd.Dir = g.gitDir
	in, err := cmd.StdinPipe()
	if err == nil {
		var out io.ReadCloser
		out, err = cmd.StdoutPipe()
		g.out = bufio.NewReader(out)
	}
	if err == nil {
		err = g.h.start(cmd)
	}
	if err != nil {
		cancel()
		return fmt.Errorf("%w: %w", errIgnorer, err)
	}
	g.cmd, g.cancel, g.in = cmd, cancel, in
	return nil
}

func (g *ignorer) failed(err error) error {
	g.close()
	return fmt.Errorf("%w: %w", errIgnorer, err)
}

// done ends the check-ignore process and closes the shadow worktree.
func (g *ignorer) done() {
	g.close()
	if g.root != nil {
		g.root.Close()
	}
}

// close ends the check-ignore process, if one runs.
func (g *ignorer) close() {
	if g.cmd == nil {
		return
	}
	g.in.Close()
	_ = g.cmd.Wait()
	g.cancel()
	g.cmd = nil
}
