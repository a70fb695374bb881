// Package ignore answers whether a path of a job's workspace is one the
// user would not want listed: what the workspace's .gitignore files leave
// out, as git reads them, and the caches tools make (__pycache__,
// node_modules, ...). The Files tab and the API's directory listings
// leave those out unless asked for everything; the diff has git itself
// apply the .gitignore files (internal/githost) and this package's caches.
//
// The rules are read from a hostile tree: each .gitignore through an
// os.Root, never through a link, no more than MaxFileBytes of them all;
// a line over maxRuleBytes is no rule, and once a Matcher has spent
// maxMatching matching, or tried maxWork rules, the rules stop applying
// (what they would hide is shown): a sandbox's .gitignore must not cost
// the server hours a listing.
package ignore

import (
	"cmp"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// MaxFileBytes is how much of the .gitignore files Load reads, all of
// them together; the rest is not.
const MaxFileBytes = 256 << 10

// maxRules bounds the rules one Matcher holds.
const maxRules = 10_000

// maxRuleBytes bounds a rule's line: longer than any path of a workspace,
// and costly to compile.
const maxRuleBytes = 4096

// maxMatching bounds the time one Matcher spends matching paths: an
// ordinary .gitignore of hundreds of rules takes well under a second for
// the thousand entries a listing shows; 10,000 rules crafted to be costly,
// against long paths, took a third of a second a path.
const maxMatching = 3 * time.Second

// maxWork bounds the rules one Matcher tries against paths, over all its
// calls (a listing's entries and the directories above them): the rules
// are the sandbox's to write, and a directory of 100,000 entries under
// 10,000 of them would take minutes of a core. Past it, Ignored says no
// more: the rest is listed as if no .gitignore left it out (the caches
// still are).
const maxWork = 5_000_000

// Caches are the names of directories tools fill with what they can make
// again; they are left out wherever they are, .gitignore or not.
var Caches = []string{"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules", ".venv", ".tox"}

// IsCache reports whether name is one of Caches.
func IsCache(name string) bool { return slices.Contains(Caches, name) }

// rule is one line of a .gitignore.
type rule struct {
	re      *regexp.Regexp // matches a path relative to base
	base    string         // the directory of its .gitignore, "" for the root
	negate  bool
	dirOnly bool
}

// Matcher holds the rules of the .gitignore files that apply to one
// directory's entries: the root's, and each one's on the way down. It
// counts the time its matching takes, so one goroutine uses it at a time.
type Matcher struct {
	rules   []rule
	read    int64           // bytes of .gitignore files Load read
	matched int             // rules matched against a path so far
	until   time.Time       // the end of maxMatching, from the first match
	budget  time.Duration   // maxMatching, unless a test set another
	spent   bool            // maxMatching is over: no rule applies
	work    int             // rules tried, up to maxWork
	dirs    map[string]bool // Hidden of the directories above the paths asked for
}

// Load reads the .gitignore files of root's directory dir ("" or "." for
// the root) and of every directory above it. A .gitignore that is not a
// regular file, or cannot be read, has no rules.
func Load(root *os.Root, dir string) *Matcher {
	m := &Matcher{}
	dir = strings.Trim(path.Clean("/"+dir), "/")
	m.load(root, "")
	if dir == "" {
		return m
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		m.load(root, strings.Join(parts[:i+1], "/"))
	}
	return m
}

func (m *Matcher) load(root *os.Root, dir string) {
	f, err := root.OpenFile(path.Join(dir, ".gitignore"), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return
	}
	b, _ := io.ReadAll(io.LimitReader(f, max(MaxFileBytes-m.read, 0)))
	m.read += int64(len(b))
	m.Add(dir, string(b))
}

// Add adds the rules of a .gitignore holding text in directory dir ("" for
// the root), after those already held: a later rule wins.
func (m *Matcher) Add(dir, text string) {
	for line := range strings.SplitSeq(text, "\n") {
		if len(m.rules) >= maxRules {
			return
		}
		if r, ok := parse(line); ok {
			r.base = dir
			m.rules = append(m.rules, r)
		}
	}
}

// Ignored reports whether the .gitignore rules leave out p (a path from
// the root), a directory if dir. Once the Matcher has spent maxMatching
// matching, or tried maxWork rules, it reports false.
func (m *Matcher) Ignored(p string, dir bool) bool {
	ignored := false
	if m.work += len(m.rules); m.work > maxWork {
		return false
	}
	for _, r := range m.rules {
		if m.overTime() {
			return false
		}
		rel := p
		if r.base != "" {
			var ok bool
			if rel, ok = strings.CutPrefix(p, r.base+"/"); !ok {
				continue
			}
		}
		if r.dirOnly && !dir || !r.re.MatchString(rel) {
			continue
		}
		ignored = !r.negate
	}
	return ignored
}

// overTime counts a match and reports whether maxMatching is spent,
// reading the clock every 32 matches.
func (m *Matcher) overTime() bool {
	if m.matched++; m.matched%32 == 1 && !m.spent {
		now := time.Now()
		if m.until.IsZero() {
			m.until = now.Add(cmp.Or(m.budget, maxMatching))
		}
		m.spent = now.After(m.until)
	}
	return m.spent
}

// Hidden reports whether p is left out: a cache, or ignored, or beneath
// a directory that is (git does not look into an ignored directory).
func (m *Matcher) Hidden(p string, dir bool) bool {
	if dir && IsCache(path.Base(p)) || m.Ignored(p, dir) {
		return true
	}
	d := path.Dir(p)
	if d == "." || d == "/" {
		return false
	}
	// The entries of one directory share it: it is worked out once.
	if h, ok := m.dirs[d]; ok {
		return h
	}
	h := m.Hidden(d, true)
	if m.dirs == nil {
		m.dirs = map[string]bool{}
	}
	m.dirs[d] = h
	return h
}

// parse reads one line of a .gitignore, as gitignore(5) says.
func parse(line string) (rule, bool) {
	line = strings.TrimSuffix(line, "\r")
	line = trimTrailingSpaces(line)
	if line == "" || strings.HasPrefix(line, "#") || len(line) > maxRuleBytes {
		return rule{}, false
	}
	var r rule
	if strings.HasPrefix(line, "!") {
		r.negate, line = true, line[1:]
	} else if strings.HasPrefix(line, `\!`) || strings.HasPrefix(line, `\#`) {
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		r.dirOnly, line = true, strings.TrimRight(line, "/")
	}
	if line == "" {
		return rule{}, false
	}
	anchored := strings.Contains(line, "/")
	line = strings.TrimPrefix(line, "/")
	expr := globRegexp(line)
	if anchored {
		expr = "^" + expr + "$"
	} else {
		expr = "(^|/)" + expr + "$"
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return rule{}, false
	}
	r.re = re
	return r, true
}

// trimTrailingSpaces drops the spaces ending line, but one escaped with
// a backslash.
func trimTrailingSpaces(line string) string {
	for strings.HasSuffix(line, " ") && !strings.HasSuffix(line, `\ `) {
		line = line[:len(line)-1]
	}
	return line
}

// globRegexp turns a gitignore glob into a regular expression: "*" and
// "?" match within one path element, "**" across them, "[...]" a class.
func globRegexp(g string) string {
	var b strings.Builder
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch {
		case strings.HasPrefix(g[i:], "**/"):
			b.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(g[i:], "/**") && i+3 == len(g):
			b.WriteString("/.*")
			i += 2
		case strings.HasPrefix(g[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '\\' && i+1 < len(g):
			i++
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		case c == '[':
			end := strings.IndexByte(g[i+1:], ']')
			if end < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := g[i+1 : i+1+end]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += end + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return b.String()
}
