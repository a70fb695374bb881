package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

// The README's transcripts are the binary's real output: the tests here
// run each block that shows an agentbox command and what it printed, with
// the scripted model, and fail when today's output differs. IDs, numbers
// and the data directory are compared by shape (job_ID, HEX, N, ~/...); a
// line "…" in a block stands for any lines.

// transcript is the output the README shows after the line "$ cmd" (up to
// the block's end or its next "$ bin/agentbox" line), and cmd's arguments.
func transcript(t *testing.T, readme, cmd string) (args []string, want []string) {
	t.Helper()
	i := strings.Index(readme, "\n$ "+cmd)
	if i < 0 {
		t.Fatalf("README has no transcript of %q", cmd)
	}
	line, rest, _ := strings.Cut(readme[i+3:], "\n")
	block, _, _ := strings.Cut(rest, "```")
	for _, l := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
		if strings.HasPrefix(l, "$ bin/agentbox ") {
			break
		}
		want = append(want, l)
	}
	return shellWords(t, strings.TrimPrefix(line, "bin/agentbox ")), want
}

// shellWords splits a command line as sh would, for the quoting the
// README uses (words, "double" and 'single' quotes).
func shellWords(t *testing.T, line string) []string {
	var words []string
	var w strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote != 0:
			w.WriteByte(c)
		case c == '"' || c == '\'':
			quote, in = c, true
		case c == ' ':
			if in {
				words = append(words, w.String())
				w.Reset()
			}
			in = false
		case c == '#':
			i = len(line) // a comment
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	if quote != 0 {
		t.Fatalf("unbalanced quote in %q", line)
	}
	return words
}

// shapes turn what changes from run to run into its shape.
var shapes = []struct {
	re *regexp.Regexp
	to string
}{
	{regexp.MustCompile(`job_[0-9a-f]{20}`), "job_ID"},
	// A duration is one shape whatever its unit: "958ms" in the README is
	// "1s" on a slower machine.
	{regexp.MustCompile(`\b([0-9]+(\.[0-9]+)?(ns|µs|ms|s|m|h))+\b`), "DUR"},
	{regexp.MustCompile(`\b[0-9a-f]*[0-9][0-9a-f]*[a-f][0-9a-f]*\b|\b[0-9a-f]*[a-f][0-9a-f]*[0-9][0-9a-f]*\b`), "HEX"},
	{regexp.MustCompile(`[0-9]+(\.[0-9]+)?`), "N"},
}

func shape(line string) string {
	line = strings.TrimRight(line, " ")
	for _, s := range shapes {
		line = s.re.ReplaceAllString(line, s.to)
	}
	return line
}

// matches reports whether got's lines are want's, "…" standing for any.
func matches(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == "…" {
		for i := 0; i <= len(got); i++ {
			if matches(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && shape(want[0]) == shape(got[0]) && matches(want[1:], got[1:])
}

// checkTranscript runs args as the README shows them, stdout and stderr
// together as on a terminal, and compares; dataDir is shown as the
// default's path. It returns the output.
func checkTranscript(t *testing.T, env []string, dataDir string, args, want []string) string {
	t.Helper()
	cmd := exec.Command(guestBinary, args...)
	cmd.Env = env
	b, err := cmd.CombinedOutput()
	out := strings.ReplaceAll(string(b), dataDir, "~/.local/share/agentbox")
	got := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if !matches(want, got) {
		t.Errorf("README's transcript of agentbox %s is not what it prints today (%v):\n%s\nREADME:\n%s",
			strings.Join(args, " "), err, out, strings.Join(want, "\n"))
	}
	return out
}

func TestReadmeRunTranscript(t *testing.T) {
	sandboxEnv(t)
	useModel(t, llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("write_file", map[string]any{"path": "hello.py", "content": "print(\"Hello, World!\")\n"})),
		step(llmtest.Call("bash", map[string]any{"command": "python3 hello.py"})),
		step(llmtest.Call("finish", map[string]any{"summary": "Created hello.py, which prints Hello, World!; ran it to check."})),
	}})
	readme := readREADME(t)
	args, want := transcript(t, readme, `bin/agentbox run "Create a Python script`)
	checkTranscript(t, os.Environ(), os.Getenv("AGENTBOX_DATA_DIR"), args, want)
}

func TestReadmeServerTranscripts(t *testing.T) {
	t.Parallel()
	const health = "    assert r.get_json() == {\"status\": \"ok\"}\n"
	s, _ := modelServer(t, "anthropic", llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("write_file", map[string]any{"path": "app.py", "content": "from flask import Flask\n\napp = Flask(__name__)\n\n\n@app.get(\"/health\")\ndef health():\n    return {\"status\": \"ok\"}\n"})),
		step(llmtest.Call("write_file", map[string]any{"path": "test_app.py", "content": "from app import app\n\n\ndef test_health():\n    r = app.test_client().get(\"/health\")\n    assert r.status_code == 200\n" + health})),
		step(llmtest.Call("bash", map[string]any{"command": "python3 -m pytest -q"})),
		step(llmtest.Call("finish", map[string]any{"summary": "app.py serves GET /health; test_app.py tests it (1 passed)."})),
		step(llmtest.Call("edit_file", map[string]any{"path": "test_app.py", "old_string": health,
			"new_string": health + "\n\ndef test_unknown_route():\n    assert app.test_client().get(\"/nope\").status_code == 404\n"})),
		step(llmtest.Call("bash", map[string]any{"command": "python3 -m pytest -q"})),
		step(llmtest.Call("finish", map[string]any{"summary": "Added test_unknown_route (2 passed)."})),
	}})
	env := append(os.Environ(), "AGENTBOX_URL="+s.url, "AGENTBOX_TOKEN="+testToken)
	readme := readREADME(t)
	args, want := transcript(t, readme, `bin/agentbox submit --follow "Build a Flask API`)
	out := checkTranscript(t, env, s.dataDir, args, want)
	id := regexp.MustCompile(`job_[0-9a-f]{20}`).FindString(out)
	if id == "" {
		t.Fatalf("no job id in:\n%s", out)
	}
	args, want = transcript(t, readme, `bin/agentbox reply -f job_`)
	for i, a := range args {
		if strings.HasPrefix(a, "job_") {
			args[i] = id
		}
	}
	checkTranscript(t, env, s.dataDir, args, want)
}

func readREADME(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
