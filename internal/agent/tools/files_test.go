package tools_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/agent/tools"
)

func TestReadFile(t *testing.T) {
	t.Parallel()
	env, dir := sandboxEnv(t)
	sh(t, env, fmt.Sprintf(`cd %s && seq 1 10 | sed 's/^/line /' > ten.txt && : > empty.txt && printf 'a\0b' > bin.dat &&
		printf 'no newline' > last.txt && printf 'crlf\r\n' > dos.txt && head -c 5000 /dev/zero | tr '\0' x > long.txt && mkdir sub && ln -s ten.txt link.txt`, dir))
	cases := []toolCase{
		{"whole", obj{"path": dir + "/ten.txt"}, false, []string{"     1\tline 1\n", "    10\tline 10\n"}, []string{"showing"}},
		{"range", obj{"path": dir + "/ten.txt", "start_line": 3, "end_line": 5}, false,
			[]string{"     3\tline 3\n     4\tline 4\n     5\tline 5\n", "[showing lines 3-5 of 10]"}, []string{"line 2\n", "line 6"}},
		{"from", obj{"path": dir + "/ten.txt", "start_line": 9}, false, []string{"     9\tline 9\n    10\tline 10\n"}, []string{"line 8"}},
		{"end past eof", obj{"path": dir + "/ten.txt", "start_line": 10, "end_line": 99}, false, []string{"line 10"}, nil},
		{"absolute", obj{"path": "/workspace/" + dir + "/ten.txt", "end_line": 1}, false, []string{"line 1\n"}, []string{"line 2"}},
		{"end before start", obj{"path": dir + "/ten.txt", "start_line": 5, "end_line": 2}, true, []string{"end_line 2 is before start_line 5"}, nil},
		{"start past end", obj{"path": dir + "/ten.txt", "start_line": 11}, true, []string{"start_line 11 is past the end", "has 10 lines"}, nil},
		{"empty", obj{"path": dir + "/empty.txt"}, false, []string{"is empty"}, nil},
		{"no final newline", obj{"path": dir + "/last.txt"}, false, []string{"     1\tno newline\n"}, nil},
		{"crlf", obj{"path": dir + "/dos.txt"}, false, []string{"     1\tcrlf\n"}, []string{"\r"}},
		{"long line", obj{"path": dir + "/long.txt"}, false, []string{"[line cut: 5000 bytes in all]"}, nil},
		{"symlink inside", obj{"path": dir + "/link.txt", "end_line": 1}, false, []string{"     1\tline 1\n"}, nil},
		{"binary", obj{"path": dir + "/bin.dat"}, true, []string{"is a binary file", "xxd"}, nil},
		{"missing", obj{"path": dir + "/nope.txt"}, true, []string{"no such file or directory", "list_files"}, nil},
		{"directory", obj{"path": dir + "/sub"}, true, []string{"is a directory", "list_files"}, nil},
		{"empty path", obj{"path": ""}, true, []string{"path is empty"}, nil},
	}
	runCases(t, env, tools.ReadFileTool{}, cases)
}

// TestReadFileLimits: a file larger than one call can show comes back in
// parts, each saying where to read on.
func TestReadFileLimits(t *testing.T) {
	t.Parallel()
	env, dir := sandboxEnv(t)
	sh(t, env, "seq 1 5000 > "+dir+"/many.txt")
	res := call(t, env, tools.ReadFileTool{}, obj{"path": dir + "/many.txt"})
	wantText(t, res, false, "     1\t1\n", "  2000\t2000\n", "[showing lines 1-2000 of 5000: to read on, call read_file with start_line=2001]")
	res = call(t, env, tools.ReadFileTool{}, obj{"path": dir + "/many.txt", "start_line": 4001})
	wantText(t, res, false, "  4001\t4001\n", "  5000\t5000\n", "[showing lines 4001-5000 of 5000]")

	small := *env
	small.MaxOutput = 1000
	res = call(t, &small, tools.ReadFileTool{}, obj{"path": dir + "/many.txt", "start_line": 100})
	wantText(t, res, false, "   100\t100\n", "to read on, call read_file with start_line=")
	if len(res.Text) > 1000 {
		t.Errorf("text is %d bytes, over MaxOutput", len(res.Text))
	}
}

func TestWriteFile(t *testing.T) {
	t.Parallel()
	env, dir := sandboxEnv(t)
	path := dir + "/a/b/c/new.py"
	res := call(t, env, tools.WriteFileTool{}, obj{"path": path, "content": "print('hi')\nprint('there')\n"})
	wantText(t, res, false, "created "+path+" (27 bytes, 2 lines)")
	if got := sh(t, env, "python3 "+path); !strings.Contains(got, "hi\nthere") {
		t.Errorf("the file does not run: %s", got)
	}
	res = call(t, env, tools.WriteFileTool{}, obj{"path": path, "content": "x"})
	wantText(t, res, false, "overwrote "+path+" (1 byte, 1 line; it was 27 bytes)")
	res = call(t, env, tools.WriteFileTool{}, obj{"path": "/workspace/" + dir + "/abs.txt", "content": ""})
	wantText(t, res, false, "created "+dir+"/abs.txt (0 bytes, 0 lines)")

	sh(t, env, "printf '#!/bin/sh\\necho v1\\n' > "+dir+"/run.sh && chmod 755 "+dir+"/run.sh")
	call(t, env, tools.WriteFileTool{}, obj{"path": dir + "/run.sh", "content": "#!/bin/sh\necho v2\n"})
	if got := sh(t, env, "./"+dir+"/run.sh"); !strings.Contains(got, "v2") {
		t.Errorf("overwriting lost the executable bit: %s", got)
	}
	res = call(t, env, tools.WriteFileTool{}, obj{"path": dir + "/a", "content": "x"})
	wantText(t, res, true, "is a directory")
}

func TestEditFile(t *testing.T) {
	t.Parallel()
	env, dir := sandboxEnv(t)
	const src = "def greet(name):\n    return 'hello ' + name\n\n\ndef main():\n    print(greet('x'))\n    print(greet('y'))\n"
	reset := func(t *testing.T, name string) string {
		t.Helper()
		call(t, env, tools.WriteFileTool{}, obj{"path": dir + "/" + name, "content": src})
		return dir + "/" + name
	}
	cases := []struct {
		name    string
		input   func(path string) obj
		isError bool
		want    []string
		after   string // the file's content after the call
	}{
		{"once", func(p string) obj {
			return obj{"path": p, "old_string": "'hello ' + name", "new_string": "f'hello {name}!'"}
		}, false, []string{"replaced 1 occurrence at line 2", "     2\t    return f'hello {name}!'"},
			strings.Replace(src, "'hello ' + name", "f'hello {name}!'", 1)},
		{"zero", func(p string) obj {
			return obj{"path": p, "old_string": "goodbye", "new_string": "x"}
		}, true, []string{"old_string was not found", "nothing was changed", "copy the text exactly"}, src},
		{"zero but whitespace", func(p string) obj {
			return obj{"path": p, "old_string": "def main():\n  print(greet('x'))", "new_string": "x"}
		}, true, []string{"not found", "A match exists if whitespace is ignored, at line 5"}, src},
		{"line numbers copied", func(p string) obj {
			return obj{"path": p, "old_string": "     2\t    return 'hello ' + name", "new_string": "x"}
		}, true, []string{"line-number prefixes", "Without them it matches at line 2"}, src},
		{"many", func(p string) obj {
			return obj{"path": p, "old_string": "print(greet(", "new_string": "show("}
		}, true, []string{"matches 2 times", "at lines 6, 7", "more surrounding lines", "replace_all"}, src},
		{"replace all", func(p string) obj {
			return obj{"path": p, "old_string": "print(greet(", "new_string": "show(", "replace_all": true}
		}, false, []string{"replaced 2 occurrences, at lines 6, 7"}, strings.ReplaceAll(src, "print(greet(", "show(")},
		{"delete", func(p string) obj {
			return obj{"path": p, "old_string": "\n\ndef main", "new_string": "\ndef main"}
		}, false, []string{"replaced 1 occurrence at line 3"}, strings.Replace(src, "\n\n\n", "\n\n", 1)},
		{"empty old", func(p string) obj {
			return obj{"path": p, "old_string": "", "new_string": "x"}
		}, true, []string{"old_string is empty", "write_file"}, src},
		{"same", func(p string) obj {
			return obj{"path": p, "old_string": "main", "new_string": "main"}
		}, true, []string{"are the same"}, src},
		{"missing file", func(p string) obj {
			return obj{"path": p + ".nope", "old_string": "a", "new_string": "b"}
		}, true, []string{"no such file or directory"}, src},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := reset(t, strings.ReplaceAll(c.name, " ", "_")+".py")
			res := call(t, env, tools.EditFileTool{}, c.input(path))
			wantText(t, res, c.isError, c.want...)
			got := call(t, env, tools.ReadFileTool{}, obj{"path": path}).Text
			if want := numberedText(c.after); got != want {
				t.Errorf("file after edit:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestEditFileCRLF: "\n" in old_string matches a CRLF file, which keeps
// its line endings.
func TestEditFileCRLF(t *testing.T) {
	t.Parallel()
	env, dir := sandboxEnv(t)
	sh(t, env, `printf 'one\r\ntwo\r\nthree\r\n' > `+dir+`/dos.txt`)
	res := call(t, env, tools.EditFileTool{}, obj{"path": dir + "/dos.txt", "old_string": "one\ntwo", "new_string": "1\n2"})
	wantText(t, res, false, "replaced 1 occurrence")
	if got := sh(t, env, "od -c "+dir+"/dos.txt"); !strings.Contains(got, `1  \r  \n   2  \r  \n   t   h   r   e   e  \r  \n`) {
		t.Errorf("line endings not kept:\n%s", got)
	}
}

// numberedText is what read_file shows of s.
func numberedText(s string) string {
	var b strings.Builder
	for i, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		fmt.Fprintf(&b, "%6d\t%s\n", i+1, line)
	}
	return b.String()
}
