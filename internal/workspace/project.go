package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A project is a person's own directory that `agentbox run` or `chat`
// works on (--workspace DIR): on a copy of it, made through an os.Root
// over it, or with --in-place in the directory itself, which the sandbox
// mounts as it is (the driver gives it to the sandbox's uid while it runs
// and back to its owner after, through a handle that follows no link).

// maxLinksOut bounds the symlinks leading out of a project that
// DescribeLinksOut names.
const maxLinksOut = 20

// ProjectDir resolves the directory of --workspace: an existing directory,
// the person's own links followed, that neither holds the data dir nor is
// in it (the sandbox would see agentbox's own files, or a copy would copy
// itself). In place, it needs root: only root can hand the directory to
// the sandbox's uid and back.
func ProjectDir(dir, dataDir string, inPlace bool) (string, error) {
	if dir == "" {
		if inPlace {
			return "", errors.New("--in-place goes with --workspace DIR")
		}
		return "", nil
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("--workspace: %w", err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() || abs == "/" {
		return "", fmt.Errorf("--workspace %s: not a directory other than /", dir)
	}
	data, err := filepath.Abs(dataDir)
	if err != nil {
		return "", err
	}
	if within(data, abs) || within(abs, data) {
		return "", fmt.Errorf("--workspace %s: it holds, or is in, agentbox's data dir %s; choose another directory", dir, data)
	}
	if inPlace && os.Geteuid() != 0 {
		return "", errors.New("--in-place needs root: the sandbox runs as a uid of its own, and only root can hand the directory to it and back (or drop --in-place to work on a copy)")
	}
	return abs, nil
}

// within reports whether path is dir or beneath it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}

// CopyProject copies the project directory dir (as ProjectDir resolved
// it) with copyTo, a store's Copy of one workspace, through an os.Root
// over dir; skipped names what the copy left out, and why. A project
// over lim says what bounds it.
func CopyProject(dir string, copyTo func(src *os.Root) (skipped []string, err error)) ([]string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("--workspace: %w", err)
	}
	defer root.Close()
	skipped, err := copyTo(root)
	if errors.Is(err, ErrTooLarge) {
		err = fmt.Errorf("--workspace %s: %w (AGENTBOX_MAX_UPLOAD bounds it)", dir, err)
	}
	return skipped, err
}

// DescribeLinksOut says which symlinks in the project dir lead out of it,
// as the sandbox may have planted them (agentbox never follows them), or
// "" when none does.
func DescribeLinksOut(dir string) string {
	links, complete := linksOut(dir)
	var say string
	if len(links) > 0 {
		say = fmt.Sprintf("symlinks leading out of the directory (left as they are; agentbox follows none): %s", strings.Join(links, ", "))
	}
	if !complete {
		say = strings.TrimPrefix(say+"; not all of the directory was looked at (too deep or too large), so there may be more", "; ")
	}
	return say
}

// maxLinksWork bounds the walk of linksOut, in directory levels resolved:
// each directory listed and link read costs its depth (os.Root resolves
// its path from the top), so a chain of directories thousands deep, which
// a sandbox makes in seconds, cost the square of its depth. About a second.
const maxLinksWork = 1 << 20

// linksOut lists the symlinks in dir that lead out of it, at most
// maxLinksOut; complete is false when the walk stopped at maxLinksWork.
func linksOut(dir string) (out []string, complete bool) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, true
	}
	defer root.Close()
	complete = true
	work := 0
	_ = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() && d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		if work += strings.Count(p, "/") + 1; work > maxLinksWork {
			complete = false
			return fs.SkipAll
		}
		if d.IsDir() {
			return nil
		}
		if target, err := root.Readlink(p); err == nil && LinkLeadsOut(p, target) {
			out = append(out, p+" -> "+target)
		}
		if len(out) >= maxLinksOut {
			return fs.SkipAll
		}
		return nil
	})
	return out, complete
}
