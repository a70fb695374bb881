package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// The tests here print what a sandbox wrote (a file, through diff and
// download; a command's output, through exec) on a real terminal, tmux,
// and read what a person would see: escape sequences shown, not acted on.

// hostile is a file a sandbox writes to take over the terminal of whoever
// looks at it: an OSC 52 clipboard write ("pwned"), a title, a screen
// clear, a line written over with a CR, a C1 CSI in UTF-8 and as a bare
// byte, a bidi override; and a colour, which may act.
const hostile = "before\n" +
	"\x1b]52;c;cHduZWQ=\x07\x1b]2;pwned\x07\x1b[2J\x1b[H" +
	"\x1b[31mred\x1b[0m\n" +
	"safe\rEVIL\n" +
	"c1 \u009b2J bare \x9b2J bidi \u202eevil\n"

// shownHostile are the pieces of hostile as the terminal must show them.
var shownHostile = []string{"^[]52;c;cHduZWQ=^G^[]2;pwned^G^[[2J^[[H", "safe^MEVIL", "c1 <U+009B>2J bare <9B>2J bidi <U+202E>evil"}

// printfCommand is a shell command writing b to path byte for byte.
func printfCommand(b, path string) string {
	var sb strings.Builder
	for _, c := range []byte(b) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == ' ' {
			sb.WriteByte(c)
		} else {
			fmt.Fprintf(&sb, "\\%03o", c)
		}
	}
	return fmt.Sprintf("printf '%s' > %s", sb.String(), path)
}

// terminalRun runs a shell script in a new terminal and returns it once
// the script printed "<<end N>>" (N: the last command's status), with the
// screen as it is then: the script lives on, so the screen stays the
// program's.
func terminalRun(t *testing.T, script string) (*testenv.Tmux, string) {
	t.Helper()
	tty := testenv.StartTmux(t, 140, 40, nil, "sh", "-c", script+`; echo "<<end $?>>"; exec sleep 600`)
	screen := tty.WaitFor("the script's end", time.Minute, func(s string) bool { return strings.Contains(s, "<<end ") })
	if !strings.Contains(screen, "<<end 0>>") {
		t.Fatalf("the script failed:\n%s", screen)
	}
	return tty, screen
}

// checkShown fails the test unless the terminal shows hostile's sequences
// instead of acting on them, and acts on its colour.
func checkShown(t *testing.T, what string, tty *testenv.Tmux, screen string) {
	t.Helper()
	for _, want := range append([]string{"before\n"}, shownHostile...) {
		if !strings.Contains(screen, want) {
			t.Errorf("%s: the screen lacks %q:\n%s", what, want, screen)
		}
	}
	if strings.Contains(screen, "[31m") || !strings.Contains(screen, "red") || !strings.Contains(tty.Raw(), "\x1b[31mred") {
		t.Errorf("%s: the colour did not act:\n%s", what, screen)
	}
	if title := tty.Title(); strings.Contains(title, "pwned") {
		t.Errorf("%s: the file set the terminal's title to %q", what, title)
	}
	if b := tty.Buffers(); b != "" {
		t.Errorf("%s: the file set the clipboard: %q", what, b)
	}
}

// checkActed fails the test unless hostile's sequences reached the
// terminal and acted (as --raw asks).
func checkActed(t *testing.T, what string, tty *testenv.Tmux, screen string) {
	t.Helper()
	if strings.Contains(screen, "before\n") || strings.Contains(screen, "^[") {
		t.Errorf("%s: the screen was not cleared, or shows escapes:\n%s", what, screen)
	}
	if title := tty.Title(); title != "pwned" {
		t.Errorf("%s: the title is %q, not the file's", what, title)
	}
	if b := tty.Buffers(); !strings.Contains(b, "pwned") {
		t.Errorf("%s: the clipboard holds %q, not the file's", what, b)
	}
}

func TestSandboxFilesOnATerminal(t *testing.T) {
	s, _ := modelServer(t, "anthropic", llmtest.Steps(
		llmtest.Call("bash", map[string]any{"command": "cd /workspace && " + printfCommand(hostile, "evil.txt")}),
		llmtest.Call("finish", map[string]any{"summary": "wrote evil.txt"}),
	))
	j := s.runJob(t, "write a file that takes over terminals", nil)
	if j.Status != "complete" {
		t.Fatalf("job %s: %s %s\n%s", j.JobID, j.Status, j.Error, s.logs)
	}
	t.Setenv("AGENTBOX_URL", s.url)
	t.Setenv("AGENTBOX_TOKEN", testToken)
	diff := s.get(t, "/v1/jobs/"+j.JobID+"/diff", 200)
	if !bytes.Contains(diff, []byte("+\x1b]52;c;")) {
		t.Fatalf("the diff lacks the file's bytes:\n%q", diff)
	}

	for _, c := range []struct{ name, args string }{
		{"diff", "diff " + j.JobID},
		{"download -o -", "download --file evil.txt -o - " + j.JobID},
	} {
		tty, screen := terminalRun(t, guestBinary+" "+c.args)
		checkShown(t, c.name, tty, screen)
		tty, screen = terminalRun(t, guestBinary+" "+c.args+" --raw")
		checkActed(t, c.name+" --raw", tty, screen)
	}

	// A pipe gets the bytes exactly.
	for _, c := range []struct {
		args []string
		want []byte
	}{
		{[]string{"diff", j.JobID}, diff},
		{[]string{"download", "--file", "evil.txt", "-o", "-", j.JobID}, []byte(hostile)},
	} {
		out, err := exec.Command(guestBinary, c.args...).Output()
		if err != nil || !bytes.Equal(out, c.want) {
			t.Errorf("agentbox %s | …: %v\n got %q\nwant %q", strings.Join(c.args, " "), err, out, c.want)
		}
	}
}

func TestExecOutputOnATerminal(t *testing.T) {
	sandboxEnv(t)
	command := printfCommand(hostile, "/dev/stdout") + " && " + printfCommand("err \x1b]2;pwned\x07\n", "/dev/stderr")
	exe := guestBinary + " exec -q '" + strings.ReplaceAll(command, "'", `'\''`) + "'"
	tty, screen := terminalRun(t, exe)
	checkShown(t, "exec", tty, screen)
	if !strings.Contains(screen, "err ^[]2;pwned^G") {
		t.Errorf("exec: the command's stderr is not shown:\n%s", screen)
	}
	tty, screen = terminalRun(t, strings.Replace(exe, " exec ", " exec --raw ", 1))
	checkActed(t, "exec --raw", tty, screen)

	out, err := exec.Command(guestBinary, "exec", "-q", command).Output()
	if err != nil || string(out) != hostile {
		t.Errorf("agentbox exec | …: %v\n got %q\nwant %q", err, out, hostile)
	}
}

// TestRunPrintsAResultWithoutControls: the summary run prints at the end
// quotes the model (and through it the sandbox): it reaches stderr
// without its escape sequences, on a terminal or not.
func TestRunPrintsAResultWithoutControls(t *testing.T) {
	sandboxEnv(t)
	useModel(t, llmtest.Steps(llmtest.Call("finish", map[string]any{"summary": "done\x1b]2;pwned\x07\x1b[2J \u009b2J\u202e ok"})))
	_, errOut, err := run(context.Background(), "run", "finish at once")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "result: done]2;pwned[2J 2J ok\n") || strings.ContainsAny(errOut, "\x1b\x07\u009b\u202e") {
		t.Errorf("run's stderr:\n%q", errOut)
	}
}
