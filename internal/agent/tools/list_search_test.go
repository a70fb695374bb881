package tools_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/agent/tools"
)

// tree makes a small project with version control and dependencies.
func tree(t *testing.T, env *tools.Env, dir string) {
	t.Helper()
	sh(t, env, fmt.Sprintf(`cd %s && mkdir -p src/pkg .git/objects/ab node_modules/left-pad &&
		printf 'import os\n\ndef main():\n    print("Hello")\n' > src/app.py &&
		printf 'def helper():\n    return "hello world"\n' > src/pkg/util.py &&
		printf '# Project\nhello from the readme\n' > README.md &&
		echo blob > .git/objects/ab/cdef && echo 'module.exports = 1 // hello' > node_modules/left-pad/index.js &&
		head -c 3000 /dev/zero > data.bin && ln -s src/app.py app-link`, dir))
}

func TestListFiles(t *testing.T) {
	t.Parallel()
	env, dir := sandboxEnv(t)
	tree(t, env, dir)
	cases := []toolCase{
		{"top level", obj{"path": dir}, false,
			[]string{"/workspace/" + dir + " (6 entries):", dir + "/src/\n", dir + "/README.md  32 B\n", dir + "/data.bin  2.9 KiB\n", dir + "/app-link -> src/app.py\n", dir + "/.git/\n"},
			[]string{"app.py  ", "objects"}},
		{"recursive", obj{"path": dir, "recursive": true}, false,
			[]string{"recursive", dir + "/src/app.py  ", dir + "/src/pkg/util.py  ", dir + "/.git/  (contents not listed)", dir + "/node_modules/  (contents not listed)"},
			[]string{".git/objects", "left-pad", "listing cut"}},
		{"inside .git", obj{"path": dir + "/.git", "recursive": true}, false, []string{dir + "/.git/objects/ab/cdef  5 B"}, nil},
		{"cut", obj{"path": dir, "recursive": true, "max_entries": 3}, false, []string{"(3 entries, recursive)", "[listing cut at 3 entries"}, nil},
		{"empty", obj{"path": dir + "/src/pkg/none"}, true, []string{"no such file or directory"}, nil},
		{"a file", obj{"path": dir + "/README.md"}, true, []string{"is a file, not a directory", "read_file"}, nil},
	}
	runCases(t, env, tools.ListFilesTool{}, cases)
	sh(t, env, "mkdir "+dir+"/void")
	wantText(t, call(t, env, tools.ListFilesTool{}, obj{"path": dir + "/void"}), false, "(empty directory)")
	wantText(t, call(t, env, tools.ListFilesTool{}, obj{}), false, "/workspace (", "t/\n")
}

func TestSearchFiles(t *testing.T) {
	t.Parallel()
	env, dir := sandboxEnv(t)
	tree(t, env, dir)
	cases := []toolCase{
		{"regex", obj{"pattern": `def \w+\(`, "path": dir}, false,
			[]string{"2 matches for /def \\w+\\(/", dir + "/src/app.py:3: def main():", dir + "/src/pkg/util.py:1: def helper():"}, nil},
		{"case", obj{"pattern": "hello", "path": dir}, false, []string{"util.py:2:", "README.md:2:"}, []string{"app.py"}},
		{"ignore case", obj{"pattern": "hello", "path": dir, "ignore_case": true}, false, []string{"app.py:4:", "util.py:2:", "README.md:2:"}, nil},
		{"glob", obj{"pattern": "hello", "path": dir, "glob": "*.py", "ignore_case": true}, false, []string{"app.py:4:", "util.py:2:", "files matching *.py"}, []string{"README"}},
		{"skips .git", obj{"pattern": "blob", "path": dir}, false, []string{"no matches"}, nil},
		{"one file", obj{"pattern": "print", "path": dir + "/src/app.py"}, false, []string{"1 match", "app.py:4:"}, nil},
		{"max results", obj{"pattern": "e", "path": dir, "max_results": 2}, false, []string{"2 matches", "[results cut at max_results=2"}, nil},
		{"bad regex", obj{"pattern": "(unclosed", "path": dir}, true, []string{"bad pattern", "missing closing )"}, nil},
		{"no lookahead", obj{"pattern": "foo(?=bar)", "path": dir}, true, []string{"bad pattern"}, nil},
		{"missing path", obj{"pattern": "x", "path": dir + "/nope"}, true, []string{"no such file or directory"}, nil},
	}
	runCases(t, env, tools.SearchFilesTool{}, cases)
}

// TestSearchFilesSkipsBinary: binary files are counted, not searched.
func TestSearchFilesSkipsBinary(t *testing.T) {
	t.Parallel()
	env, dir := sandboxEnv(t)
	sh(t, env, `printf 'needle\0\n' > `+dir+`/b.bin && echo needle > `+dir+`/t.txt`)
	res := call(t, env, tools.SearchFilesTool{}, obj{"pattern": "needle", "path": dir})
	wantText(t, res, false, "t.txt:1: needle", "[1 binary or very large files were not searched]")
	if strings.Contains(res.Text, "b.bin:") {
		t.Errorf("searched a binary file:\n%s", res.Text)
	}
}
