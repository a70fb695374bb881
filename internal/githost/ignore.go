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
	"path/filepath"
	"strings"
)

// errIgnorer is why asking which paths are ignored failed.
var errIgnorer = errors.New("git check-ignore")

// maxIgnoreBytes bounds a .gitignore the walk copies; a larger one is
// taken as absent.
const maxIgnoreBytes = 4 << 20

// ignorer answers which workspace paths .gitignore files ignore, with
// `git check-ignore` run on a shadow worktree: a host directory holding a
// copy of each .gitignore the walk met (regular files only), and nothing
// else. git never reads the workspace itself.
type ignorer struct {
	h      *Host
	gitDir string
	shadow string
	cmd    *exec.Cmd
	cancel context.CancelFunc
	in     io.WriteCloser
	out    *bufio.Reader
}

func (h *Host) newIgnorer(gitDir, tmp string) *ignorer {
	return &ignorer{h: h, gitDir: gitDir, shadow: filepath.Join(tmp, "worktree")}
}

// enter copies the .gitignore of workspace directory p (ents are its
// entries) into the shadow worktree, and reports whether there was one.
func (g *ignorer) enter(root *os.Root, p string, ents []fs.DirEntry) (bool, error) {
	for _, e := range ents {
		if e.Name() == ".gitignore" && e.Type().IsRegular() {
			return g.copy(root, filepath.Join(p, ".gitignore"))
		}
	}
	return false, nil
}

func (g *ignorer) copy(root *os.Root, name string) (bool, error) {
	f, err := root.OpenFile(name, openFlags, 0)
	if err != nil {
		return false, nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxIgnoreBytes {
		return false, nil
	}
	b, err := io.ReadAll(io.LimitReader(f, maxIgnoreBytes))
	if err != nil {
		return false, nil
	}
	dst := filepath.Join(g.shadow, name)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return false, fmt.Errorf("ignore rules: %w", err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		return false, fmt.Errorf("ignore rules: %w", err)
	}
	return true, nil
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
