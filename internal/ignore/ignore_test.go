package ignore_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/ignore"
)

func TestIgnored(t *testing.T) {
	m := &ignore.Matcher{}
	m.Add("", strings.Join([]string{
		"# a comment", "", "*.log", "!keep.log", "/build", "dist/", "docs/**/*.tmp", "**/secret",
		"a?c.txt", "[xy].bin", `\#hash`, "trailing   ", "logs/**",
	}, "\n"))
	m.Add("sub", "*.o\n/only-here\n")
	tests := []struct {
		path string
		dir  bool
		want bool
	}{
		{"x.log", false, true},
		{"deep/in/x.log", false, true},
		{"keep.log", false, false},
		{"build", true, true},
		{"build", false, true},
		{"src/build", true, false}, // anchored to the root
		{"dist", true, true},
		{"dist", false, false}, // a directory rule
		{"src/dist", true, true},
		{"docs/a/b/c.tmp", false, true},
		{"docs/c.tmp", false, true},
		{"other/c.tmp", false, false},
		{"secret", false, true},
		{"a/b/secret", true, true},
		{"abc.txt", false, true},
		{"abbc.txt", false, false},
		{"x.bin", false, true},
		{"z.bin", false, false},
		{"#hash", false, true},
		{"trailing", false, true},
		{"logs/a/b", false, true},
		{"sub/x.o", false, true},
		{"x.o", false, false}, // sub's rules apply beneath sub only
		{"sub/only-here", false, true},
		{"sub/deeper/only-here", false, false},
		{"main.go", false, false},
	}
	for _, tt := range tests {
		if got := m.Ignored(tt.path, tt.dir); got != tt.want {
			t.Errorf("Ignored(%q, dir=%v) = %v, want %v", tt.path, tt.dir, got, tt.want)
		}
	}
}

func TestHidden(t *testing.T) {
	m := &ignore.Matcher{}
	m.Add("", "out/\n")
	for _, tt := range []struct {
		path      string
		dir, want bool
	}{
		{"__pycache__", true, true}, {"a/b/node_modules", true, true}, {".pytest_cache", true, true},
		{"out/x/y.txt", false, true}, {"pkg/__pycache__/m.pyc", false, true}, {"src/main.py", false, false},
	} {
		if got := m.Hidden(tt.path, tt.dir); got != tt.want {
			t.Errorf("Hidden(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
	if m.Hidden("__pycache__", false) {
		t.Error("a file named like a cache directory is hidden")
	}
}

// TestLoad reads the .gitignore files on the way to a directory, never
// through a link, and no more than MaxFileBytes of them all.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".gitignore", "*.log\n")
	write("a/.gitignore", "*.tmp\n")
	write("outside/rules", "*.go\n")
	write("a/b/x", "")
	if err := os.Symlink("../outside/rules", filepath.Join(dir, "a/b/.gitignore")); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("#\n", ignore.MaxFileBytes/2) + "*.txt\n"
	write("c/.gitignore", big)
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	m := ignore.Load(root, "a/b")
	for p, want := range map[string]bool{"a/b/x.log": true, "a/b/x.tmp": true, "a/b/x.go": false, "x.tmp": false} {
		if got := m.Ignored(p, false); got != want {
			t.Errorf("Ignored(%q) = %v, want %v", p, got, want)
		}
	}
	if ignore.Load(root, "c").Ignored("c/x.txt", false) {
		t.Error("a rule past MaxFileBytes was read")
	}
}
