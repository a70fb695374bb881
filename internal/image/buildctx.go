package image

import (
	"archive/tar"
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// A user's build context is the Dockerfile's directory, sent as a tar as
// the docker CLI sends it: less what its .dockerignore excludes (the
// Dockerfile and .dockerignore are always sent), links kept as links
// (never followed), files other than regular ones, directories and links
// left out. The directory is a user's: it is read beneath an os.Root, so
// no link planted in it, even one swapped in while it is read, leads out.

// ignoreRule is one line of a .dockerignore.
type ignoreRule struct {
	re      *regexp.Regexp
	include bool // a "!" line: an exception
}

// readIgnore reads the context's .dockerignore; none is no rules.
func readIgnore(root *os.Root) ([]ignoreRule, error) {
	f, err := root.Open(".dockerignore")
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("build context: %w", err)
	}
	defer f.Close()
	var rules []ignoreRule
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := ignoreRule{}
		if line, r.include = strings.CutPrefix(line, "!"); r.include {
			line = strings.TrimSpace(line)
		}
		pattern := strings.TrimPrefix(path.Clean("/"+filepath.ToSlash(line)), "/")
		if r.re, err = globRegexp(pattern); err != nil {
			return nil, fmt.Errorf("build context: .dockerignore %q: %w", line, err)
		}
		rules = append(rules, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("build context: .dockerignore: %w", err)
	}
	return rules, nil
}

// globRegexp turns a .dockerignore pattern into a regular expression:
// "**" is any number of path elements, "*" any run of non-slash
// characters, "?" one, [...] a class, \ escapes.
func globRegexp(p string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '*' && strings.HasPrefix(p[i:], "**/"):
			b.WriteString("(.*/)?")
			i += 2
		case c == '*' && strings.HasPrefix(p[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '[':
			j := strings.IndexByte(p[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("unclosed [")
			}
			b.WriteString(strings.Replace(p[i:i+j+1], "[!", "[^", 1))
			i += j
		case c == '\\' && i+1 < len(p):
			i++
			b.WriteString(regexp.QuoteMeta(p[i : i+1]))
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// ignored reports whether rel (slash-separated) is left out: the last rule
// matching it or one of its parent directories decides.
func ignored(rules []ignoreRule, rel string) bool {
	out := false
	for _, r := range rules {
		for p := rel; p != "."; p = path.Dir(p) {
			if r.re.MatchString(p) {
				out = !r.include
				break
			}
		}
	}
	return out
}

// contextEntry is one file, directory or link of a build context.
type contextEntry struct {
	rel  string // slash-separated, relative to the context's root
	info fs.FileInfo
	link string
}

// listContext walks the context and returns what it holds, with the
// total size of its files. keep are names always sent.
func listContext(root *os.Root, keep ...string) ([]contextEntry, int64, error) {
	rules, err := readIgnore(root)
	if err != nil {
		return nil, 0, err
	}
	var out []contextEntry
	var size int64
	err = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("build context: %w", err)
		}
		if rel == "." || (ignored(rules, rel) && !slices.Contains(keep, rel)) {
			return nil // an excluded directory is walked: an exception may bring back what is in it
		}
		e, ok, err := entryOf(root, rel, d)
		if err != nil || !ok {
			return err
		}
		if e.info.Mode().IsRegular() {
			size += e.info.Size()
		}
		out = append(out, e)
		return nil
	})
	return out, size, err
}

func entryOf(root *os.Root, rel string, d fs.DirEntry) (contextEntry, bool, error) {
	info, err := d.Info()
	if err != nil {
		return contextEntry{}, false, fmt.Errorf("build context: %w", err)
	}
	e := contextEntry{rel: rel, info: info}
	switch m := info.Mode(); {
	case m.IsRegular() || m.IsDir():
	case m&fs.ModeSymlink != 0:
		if e.link, err = root.Readlink(rel); err != nil {
			return e, false, fmt.Errorf("build context: %w", err)
		}
	default:
		return e, false, nil // a device, socket or pipe has no place in an image
	}
	return e, true, nil
}

// writeContext writes the entries as a tar to w, owned by root.
func writeContext(w io.Writer, root *os.Root, entries []contextEntry) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		if err := writeEntry(tw, root, e); err != nil {
			return fmt.Errorf("build context: %s: %w", e.rel, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("build context: %w", err)
	}
	return nil
}

func writeEntry(tw *tar.Writer, root *os.Root, e contextEntry) error {
	hdr, err := tar.FileInfoHeader(e.info, e.link)
	if err != nil {
		return err
	}
	hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname, hdr.Format = e.rel, 0, 0, "", "", tar.FormatPAX
	if e.info.IsDir() {
		hdr.Name += "/"
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if !e.info.Mode().IsRegular() {
		return nil
	}
	f, err := root.Open(e.rel)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("no longer a regular file")
	}
	// A file that grew since it was listed is cut at its listed size.
	_, err = io.Copy(tw, io.LimitReader(f, hdr.Size))
	return err
}
