package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// The tests here drive `agentbox chat` (the built binary) in a real
// terminal, tmux, with the scripted model, and read the screen a person
// would see.

// sgr matches a colour or style escape sequence.
var sgr = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// prompt is the line the editor is on: the screen's last line with text.
func promptLine(screen string) string {
	lines := strings.Split(strings.TrimRight(screen, "\n "), "\n")
	return strings.TrimRight(lines[len(lines)-1], " ")
}

// atPrompt reports whether the screen waits at an empty prompt.
func atPrompt(screen string) bool { return promptLine(screen) == "you>" }

// noEscapes fails the test if the screen shows an escape sequence's
// remains: a paste's markers, "^[" or the escape character itself.
func noEscapes(t *testing.T, screen string) {
	t.Helper()
	for _, bad := range []string{"200~", "201~", "^[", "\x1b", "[3", "[0m"} {
		if strings.Contains(screen, bad) {
			t.Errorf("the screen shows %q:\n%s", bad, screen)
		}
	}
}

func TestChatInATerminal(t *testing.T) {
	sandboxEnv(t)
	command := "cd /workspace && printf 'a\\nb\\n' > in.txt && wc -l < in.txt"
	fake := useModel(t, llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("bash", map[string]any{"command": command})),
		step(llmtest.Call("write_file", map[string]any{"path": "notes.md", "content": "one\ntwo\n"})),
		step(llmtest.Say("Three lines; in.txt has 2.")),
		step(llmtest.Turn{Text: "Working slowly.\n", Stall: true}),
		step(llmtest.Say("Going on where we were.")),
		step(llmtest.Call("bash", map[string]any{"command": "sleep 600"})),
		step(llmtest.Call("bash", map[string]any{"command": "pgrep -x sleep || echo no sleep left"})),
		step(llmtest.Say("Checked.")),
	}})
	tty := testenv.StartTmux(t, 120, 40, nil, guestBinary, "chat", "--session", "tty")
	tty.WaitFor("the prompt", time.Minute, atPrompt)

	// A three-line paste is shown as typed and sent as one message.
	tty.Paste("line one\nline two\nline three")
	tty.WaitFor("the pasted lines", 10*time.Second, func(s string) bool { return strings.Contains(s, "line three") })
	tty.Keys("Enter")
	screen := tty.WaitFor("the turn's status line", time.Minute, func(s string) bool { return strings.Contains(s, "─ 3 steps") && atPrompt(s) })
	noEscapes(t, screen)
	if got := fake.Requests()[0].Messages[0].PlainText(); got != "line one\nline two\nline three" {
		t.Errorf("the paste reached the model as %q", got)
	}
	for _, want := range []string{"\n$ " + command + "\n", "│ 2\n", "+one", "Three lines; in.txt has 2.", "tokens in", " out · $", "context "} {
		if !strings.Contains(screen, want) {
			t.Errorf("the screen lacks %q:\n%s", want, screen)
		}
	}
	if !strings.Contains(tty.Raw(), "\x1b[32m+one") {
		t.Errorf("the file's diff is not green on a terminal")
	}

	// Up recalls the last message; Ctrl-C clears the line.
	tty.Keys("Up")
	tty.WaitFor("the recalled message", 10*time.Second, func(s string) bool { return strings.Contains(promptLine(s), "line three") })
	tty.Keys("C-c")
	tty.WaitFor("a cleared prompt", 10*time.Second, atPrompt)

	// Ctrl-C in a running turn returns to the prompt within a second.
	tty.Type("second message")
	tty.Keys("Enter")
	tty.WaitFor("the streamed text and the spinner", time.Minute, func(s string) bool {
		return strings.Contains(s, "Working slowly.") && strings.Contains(s, "thinking · ") && strings.Contains(s, "Ctrl-C to cancel")
	})
	start := time.Now()
	tty.Keys("C-c")
	tty.WaitFor("the prompt after the cancel", 5*time.Second, func(s string) bool { return atPrompt(s) && strings.Contains(s, "canceled") })
	if took := time.Since(start); took > time.Second {
		t.Errorf("the prompt came back %v after Ctrl-C", took)
	} else {
		t.Logf("Ctrl-C in the model's stream: the prompt is back in %v (screen polled every 20 ms)", took)
	}

	// The next message goes on with the same conversation.
	tty.Type("third")
	tty.Keys("Enter")
	tty.WaitFor("the answer", time.Minute, func(s string) bool { return strings.Contains(s, "Going on where we were.") && atPrompt(s) })
	reqs := fake.Requests()
	var said []string
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == "user" && m.PlainText() != "" {
			said = append(said, m.PlainText())
		}
	}
	if strings.Join(said, "|") != "line one\nline two\nline three|second message|third" {
		t.Errorf("the last request's user messages: %q", said)
	}
	// Ctrl-C stops a command the turn runs in the sandbox as quickly.
	tty.Type("now wait")
	tty.Keys("Enter")
	tty.WaitFor("the command and the spinner", time.Minute, func(s string) bool {
		return strings.Contains(s, "$ sleep 600") && strings.Contains(s, "running bash · ")
	})

	start = time.Now()
	tty.Keys("C-c")
	screen = tty.WaitFor("the prompt after the cancel", 5*time.Second, func(s string) bool { return atPrompt(s) && strings.Count(s, "· canceled") == 2 })
	if took := time.Since(start); took > time.Second {
		t.Errorf("the prompt came back %v after Ctrl-C in a command", took)
	} else {
		t.Logf("Ctrl-C in a command: the prompt is back in %v", took)
	}
	if !strings.Contains(screen, "✗ not completed: canceled") {
		t.Errorf("the canceled command's result:\n%s", screen)
	}
	// The canceled command is gone from the sandbox, which stays.
	tty.Type("is it gone?")
	tty.Keys("Enter")
	screen = tty.WaitFor("the check", time.Minute, func(s string) bool { return strings.Contains(s, "Checked.") && atPrompt(s) })
	if !strings.Contains(screen, "│ no sleep left") {
		t.Errorf("the canceled command still runs:\n%s", screen)
	}
	tty.Keys("C-d")
	tty.WaitFor("chat to leave", 30*time.Second, func(string) bool { _, done := tty.Exited(); return done })
	if code, _ := tty.Exited(); code != 0 {
		t.Errorf("chat exited %d after Ctrl-D", code)
	}

	// The history is the session's, across runs.
	again := testenv.StartTmux(t, 120, 40, nil, guestBinary, "chat", "--session", "tty")
	again.WaitFor("the prompt", time.Minute, atPrompt)
	again.Keys("Up")
	again.WaitFor("the last session's last message", 10*time.Second, func(s string) bool { return promptLine(s) == "you> is it gone?" })
	again.Keys("C-c", "C-d")
	again.WaitFor("chat to leave", 30*time.Second, func(string) bool { _, done := again.Exited(); return done })
}

func TestChatInATerminalWithoutColour(t *testing.T) {
	sandboxEnv(t)
	useModel(t, llmtest.Steps(
		llmtest.Call("write_file", map[string]any{"path": "a.txt", "content": "green?\n"}),
		llmtest.Call("bash", map[string]any{"command": "ls -l a.txt > /dev/null && cat < a.txt"}),
		llmtest.Say("Done."),
	))
	tty := testenv.StartTmux(t, 100, 30, []string{"NO_COLOR=1"}, guestBinary, "chat", "--session", "nocolour")
	tty.WaitFor("the prompt", time.Minute, atPrompt)
	tty.Type("write a.txt")
	tty.Keys("Enter")
	screen := tty.WaitFor("the answer", time.Minute, func(s string) bool { return strings.Contains(s, "Done.") && atPrompt(s) })
	noEscapes(t, screen)
	for _, want := range []string{"+green?", "$ ls -l a.txt > /dev/null && cat < a.txt", "─ 3 steps"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the screen lacks %q:\n%s", want, screen)
		}
	}
	if m := sgr.FindString(tty.Raw()); m != "" {
		t.Errorf("NO_COLOR, yet the output holds the colour sequence %q", m)
	}
	tty.Keys("C-d")
	tty.WaitFor("chat to leave", 30*time.Second, func(string) bool { _, done := tty.Exited(); return done })
}

func TestChatFromAPipe(t *testing.T) {
	sandboxEnv(t)
	fake := useModel(t, llmtest.Steps(llmtest.Say("Piped hello."), llmtest.Say("Second.")))
	cmd := exec.Command(guestBinary, "chat", "--session", "piped")
	cmd.Stdin = strings.NewReader("hello\\\nthere\n/help\nagain\n")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("chat from a pipe: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "Piped hello.") || !strings.Contains(out.String(), "Second.") || !strings.Contains(errOut.String(), "/load SESSION") {
		t.Errorf("stdout %q\nstderr %q", out.String(), errOut.String())
	}
	if got := fake.Requests()[0].Messages[0].PlainText(); got != "hello\nthere" {
		t.Errorf("first message %q", got)
	}
	if strings.Contains(out.String()+errOut.String(), "\x1b") {
		t.Errorf("escape codes written to a pipe:\nstdout %q\nstderr %q", out.String(), errOut.String())
	}
}

// TestChatCtrlCStormAndHostileText: Ctrl-C pressed several times in a
// turn cancels that turn only, not the next; a tool name and a model
// error holding escape sequences reach the screen as plain text.
func TestChatCtrlCStormAndHostileText(t *testing.T) {
	sandboxEnv(t)
	const evil = "x\x1b]0;PWNED\x07\x1b[2J\u009b3A"
	fake := useModel(t, llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Turn{Text: "Working slowly.\n", Stall: true}),
		step(llmtest.Say("Answered the second.")),
		step(llmtest.Call("no_such_tool"+evil, map[string]any{"k": evil})),
		step(llmtest.Say("Done.")),
	}})
	tty := testenv.StartTmux(t, 120, 40, nil, guestBinary, "chat", "--session", "storm")
	tty.WaitFor("the prompt", time.Minute, atPrompt)
	tty.Type("first")
	tty.Keys("Enter")
	tty.WaitFor("the spinner", time.Minute, func(s string) bool { return strings.Contains(s, "thinking · ") })
	tty.Keys("C-c", "C-c", "C-c")
	tty.WaitFor("the prompt after the cancel", 10*time.Second, func(s string) bool { return atPrompt(s) && strings.Contains(s, "canceled") })
	tty.Type("second")
	tty.Keys("Enter")
	screen := tty.WaitFor("the second turn's end", time.Minute, func(s string) bool { return atPrompt(s) && strings.Count(s, "─ ") == 2 })
	if !strings.Contains(screen, "Answered the second.") || strings.Count(screen, "canceled") != 1 {
		t.Errorf("a Ctrl-C of the first turn canceled the second:\n%s", screen)
	}
	tty.Type("third")
	tty.Keys("Enter")
	tty.WaitFor("the third turn's end", time.Minute, func(s string) bool { return atPrompt(s) && strings.Contains(s, "Done.") })
	if raw := tty.Raw(); strings.Contains(raw, "\x1b]0;") || strings.Contains(raw, "\x1b[2J") || strings.Contains(raw, "\u009b") {
		t.Errorf("the model's escape sequences reached the terminal: %q", raw)
	}
	if n := len(fake.Requests()); n != 4 {
		t.Errorf("%d requests, want 4", n)
	}
	tty.Keys("C-d")
	tty.WaitFor("chat to leave", 30*time.Second, func(string) bool { _, done := tty.Exited(); return done })
}

// TestChatOnADumbTerminal: with TERM=dumb chat reads plain lines, writes
// no escape sequence (not even bracketed paste's), and Ctrl-C at the
// prompt (a SIGINT there) ends it at once, saved.
func TestChatOnADumbTerminal(t *testing.T) {
	sandboxEnv(t)
	useModel(t, llmtest.Steps(llmtest.Say("Plain hello.")))
	tty := testenv.StartTmux(t, 100, 30, nil, "env", "TERM=dumb", guestBinary, "chat", "--session", "dumb")
	tty.WaitFor("the prompt", time.Minute, atPrompt)
	tty.Type("hello")
	tty.Keys("Enter")
	tty.WaitFor("the answer", time.Minute, func(s string) bool { return strings.Contains(s, "Plain hello.") && atPrompt(s) })
	tty.Type("half")
	tty.Keys("C-c")
	// (The exit status, 130, is not asserted: tmux reports it late.)
	tty.WaitFor("chat to leave, saved", 10*time.Second, func(s string) bool {
		_, done := tty.Exited()
		return done && strings.Contains(s, "interrupted; session saved")
	})
	if raw := tty.Raw(); strings.Contains(raw, "\x1b") {
		t.Errorf("escape codes written to a dumb terminal: %q", raw)
	}
}

// TestChatClosedTerminal: closing the terminal (SIGHUP) ends chat as
// Ctrl-D does: the sandbox is removed and the session saved.
func TestChatClosedTerminal(t *testing.T) {
	instance := sandboxEnv(t)
	useModel(t, llmtest.Steps(llmtest.Say("Hello.")))
	tty := testenv.StartTmux(t, 100, 30, nil, guestBinary, "chat", "--session", "hup")
	tty.WaitFor("the prompt", time.Minute, atPrompt)
	tty.Type("hi")
	tty.Keys("Enter")
	tty.WaitFor("the answer", time.Minute, func(s string) bool { return strings.Contains(s, "Hello.") && atPrompt(s) })
	pid := tty.Hangup()
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("chat (pid %d) still runs 30 s after its terminal closed", pid)
		}
		time.Sleep(20 * time.Millisecond) // no event to await a process that is not our child
	}
	assertNoSandboxes(t, instance)
	b, err := os.ReadFile(filepath.Join(os.Getenv("AGENTBOX_DATA_DIR"), "chats", "hup", "history.json"))
	if err != nil || !strings.Contains(string(b), "Hello.") {
		t.Errorf("session not saved: %v %s", err, b)
	}
}
