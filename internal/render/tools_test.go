package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// numbered is n lines "line 1"… joined by newlines.
func numbered(n int) string {
	var sb strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&sb, "line %d\n", i)
	}
	return sb.String()
}

// call is a tool_call payload of name with input.
func call(t *testing.T, name string, input any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(map[string]any{"id": "a", "name": name, "step": 1, "input": input})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestToolCalls: each kind of tool call reads like a terminal session,
// its characters as they are (no JSON escapes), control characters gone.
func TestToolCalls(t *testing.T) {
	folded := "$ line 1\n"
	for i := 2; i <= 10; i++ {
		folded += fmt.Sprintf("  line %d\n", i)
	}
	folded += "  … 10 lines hidden …\n"
	for i := 21; i <= 30; i++ {
		folded += fmt.Sprintf("  line %d\n", i)
	}
	tests := []struct {
		name, tool string
		input      any
		want       string
	}{
		{"bash verbatim", "bash", map[string]any{"command": `cd /workspace && python3 hello.py < in.txt > "out file.txt" 2>&1 'x'`},
			"$ cd /workspace && python3 hello.py < in.txt > \"out file.txt\" 2>&1 'x'\n"},
		{"bash multi-line", "bash", map[string]any{"command": "cat <<EOF > a.txt\nhello\nEOF\n", "timeout_seconds": 30},
			"$ cat <<EOF > a.txt\n  hello\n  EOF\n"},
		{"bash hostile", "bash", map[string]any{"command": "echo \x1b]52;c;cGF3bmVk\x07hi\x1b[2J\u009b"}, "$ echo ]52;c;cGF3bmVkhi[2J\n"},
		{"bash folded", "bash", map[string]any{"command": numbered(30)}, folded},
		{"read", "read_file", map[string]any{"path": "src/main.go"}, "▶ read src/main.go\n"},
		{"read lines", "read_file", map[string]any{"path": "a.go", "start_line": 3, "end_line": 10}, "▶ read a.go lines 3-10\n"},
		{"read odd path", "read_file", map[string]any{"path": "a\nb\x1b[2J"}, "▶ read a…\n"},
		{"list", "list_files", map[string]any{"path": "."}, "▶ list .\n"},
		{"list recursive", "list_files", map[string]any{"path": "src", "recursive": true}, "▶ list src (recursive)\n"},
		{"write", "write_file", map[string]any{"path": "hello.py", "content": "print(\"Hello, World!\")\n"},
			"▶ write hello.py\n  +print(\"Hello, World!\")\n"},
		{"write capped", "write_file", map[string]any{"path": "n.txt", "content": numbered(25)},
			"▶ write n.txt\n" + strings.ReplaceAll(numbered(10), "line", "  +line") + "  … 15 more lines\n"},
		{"edit", "edit_file", map[string]any{"path": "calc.py", "old_string": "return a - b\n", "new_string": "return a + b\n# fixed"},
			"▶ edit calc.py\n  -return a - b\n  +return a + b\n  +# fixed\n"},
		{"edit all", "edit_file", map[string]any{"path": "a.go", "old_string": "x", "new_string": "y", "replace_all": true},
			"▶ edit a.go (all)\n  -x\n  +y\n"},
		{"other", "search_files", map[string]any{"pattern": "a && b <c>", "path": ".", "ignore_case": true, "max_results": 5},
			"▶ search_files ignore_case=true max_results=5 path=. pattern=\"a && b <c>\"\n"},
		{"other multi-line", "python", map[string]any{"code": "import os\nprint(os.getcwd())"}, "▶ python code=\"import os…\"\n"},
		{"other nested", "computer", map[string]any{"action": "left_click", "coordinate": []int{10, 20}},
			"▶ computer action=left_click coordinate=[10,20]\n"},
		{"finish", "finish", map[string]any{"summary": "done <ok>"}, "▶ finish summary=\"done <ok>\"\n"},
		{"empty", "finish", map[string]any{}, "▶ finish\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errw bytes.Buffer
			if err := NewSteps(&out, &errw).Show("tool_call", call(t, tt.tool, tt.input)); err != nil {
				t.Fatal(err)
			}
			if out.Len() != 0 || errw.String() != tt.want {
				t.Errorf("stdout %q\nstderr %q\nwant   %q", out.String(), errw.String(), tt.want)
			}
		})
	}
}

// TestToolResultFolded: a long result shows its first and last ten lines
// and how many are hidden; a short one shows whole.
func TestToolResultFolded(t *testing.T) {
	want := strings.ReplaceAll(numbered(10), "line", "  │ line") + "  │ … 103 lines hidden …\n"
	for i := 114; i <= 123; i++ {
		want += fmt.Sprintf("  │ line %d\n", i)
	}
	for _, tt := range []struct{ text, want string }{
		{numbered(123), want},
		{numbered(21), strings.ReplaceAll(numbered(21), "line", "  │ line")},
		{"a\x1b[31mred\x1b[0m\r\n", "  │ a[31mred[0m\n"},
	} {
		var out bytes.Buffer
		b, _ := json.Marshal(map[string]any{"id": "a", "name": "bash", "step": 1, "text": tt.text})
		if err := NewSteps(&out, &out).Show("tool_result", b); err != nil {
			t.Fatal(err)
		}
		if out.String() != tt.want {
			t.Errorf("result of %d lines:\n%q\nwant\n%q", strings.Count(tt.text, "\n"), out.String(), tt.want)
		}
	}
}

// TestDiffColour: with colour on, a diff's removed lines are red and its
// added lines green; with it off there is no escape byte at all.
func TestDiffColour(t *testing.T) {
	in := call(t, "edit_file", map[string]any{"path": "a", "old_string": "x", "new_string": "y"})
	var errw bytes.Buffer
	s := NewSteps(&errw, &errw)
	s.color = true
	if err := s.Show("tool_call", in); err != nil {
		t.Fatal(err)
	}
	if want := "▶ edit a\n  " + red + "-x" + reset + "\n  " + green + "+y" + reset + "\n"; errw.String() != want {
		t.Errorf("coloured: %q, want %q", errw.String(), want)
	}
}

// TestNoColour: on a terminal colour is on unless NO_COLOR is set; off a
// terminal, or with NO_COLOR, the steps hold no escape byte at all.
func TestNoColour(t *testing.T) {
	tty := openTerminal(t)
	t.Setenv("NO_COLOR", "")
	os.Unsetenv("NO_COLOR")
	if !ColorOn(tty) {
		t.Error("ColorOn(a terminal) = false without NO_COLOR")
	}
	if ColorOn(&bytes.Buffer{}) || ColorOn(devNull(t)) {
		t.Error("ColorOn is true off a terminal")
	}
	t.Setenv("NO_COLOR", "1")
	if ColorOn(tty) {
		t.Error("ColorOn(a terminal) = true with NO_COLOR=1")
	}
	var out, errw bytes.Buffer
	s := NewSteps(&out, &errw)
	for _, in := range []json.RawMessage{
		call(t, "edit_file", map[string]any{"path": "a", "old_string": "x\ny", "new_string": "z"}),
		call(t, "write_file", map[string]any{"path": "b", "content": numbered(30)}),
		call(t, "bash", map[string]any{"command": "echo \x1b[31mhi"}),
	} {
		if err := s.Show("tool_call", in); err != nil {
			t.Fatal(err)
		}
	}
	if bytes.ContainsRune(out.Bytes(), 0x1b) || bytes.ContainsRune(errw.Bytes(), 0x1b) {
		t.Errorf("escape bytes without colour:\n%q\n%q", out.String(), errw.String())
	}
}

// openTerminal opens the follower end of a new pseudo-terminal.
func openTerminal(t *testing.T) *os.File {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptm.Close() })
	fd := int(ptm.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	return pts
}

// devNull opens /dev/null, a character device that is no terminal.
func devNull(t *testing.T) *os.File {
	t.Helper()
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
