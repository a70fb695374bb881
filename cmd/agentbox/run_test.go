package main

import (
	"archive/zip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/lockfile"
)

// useModel points the CLI at a scripted model in the Anthropic format.
func useModel(t *testing.T, script llmtest.Script) *llmtest.Server {
	t.Helper()
	fake := llmtest.New(t, script)
	t.Setenv("ANTHROPIC_API_KEY", "test-key")
	t.Setenv("ANTHROPIC_BASE_URL", fake.AnthropicURL())
	t.Setenv("AGENTBOX_MODEL", "anthropic:claude-sonnet-4-5")
	t.Setenv("AGENTBOX_AGENT", "model")
	return fake
}

func TestRunWithoutModelSaysWhatToSet(t *testing.T) {
	for _, k := range []string{"AGENTBOX_MODEL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"} {
		t.Setenv(k, "")
	}
	t.Setenv("AGENTBOX_DATA_DIR", t.TempDir())
	_, _, err := run(context.Background(), "run", "do something")
	if err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") || !strings.Contains(err.Error(), "OPENAI_BASE_URL") {
		t.Fatalf("err = %v, want it to name the variables to set", err)
	}
}

func TestRunShowsStepsAndLeavesAZip(t *testing.T) {
	instance := sandboxEnv(t)
	useModel(t, helloScript())
	out, errOut, err := run(context.Background(), "run", "Create a Python script that prints Hello, World!")
	if err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	for _, want := range []string{"▶ write hello.py\n  +print(\"Hello, World!\")\n", "\n$ python3 hello.py\n", "▶ finish summary=\"hello.py prints Hello, World!\""} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if !strings.Contains(out, "Hello, World!") {
		t.Errorf("stdout lacks the command's output:\n%s", out)
	}
	zr, err := zip.OpenReader(artifactsPath(t, errOut))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	if len(zr.File) != 2 || zr.File[0].Name != "agentbox.diff" || zr.File[1].Name != "hello.py" {
		t.Errorf("zip holds %v", zr.File)
	} else if rc, err := zr.File[0].Open(); err == nil {
		diff, _ := io.ReadAll(rc)
		rc.Close()
		if !strings.Contains(string(diff), "+++ b/hello.py") {
			t.Errorf("agentbox.diff:\n%s", diff)
		}
	}
	assertNoSandboxes(t, instance)
}

// artifactsPath is the zip `agentbox run` says it left, in its stderr.
func artifactsPath(t *testing.T, errOut string) string {
	t.Helper()
	i := strings.Index(errOut, "artifacts: ")
	if i < 0 {
		t.Fatalf("no artifacts path:\n%s", errOut)
	}
	return strings.TrimSpace(strings.SplitN(errOut[i+len("artifacts: "):], "\n", 2)[0])
}

func TestChatSession(t *testing.T) {
	instance := sandboxEnv(t)
	fake := useModel(t, llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("bash", map[string]any{"command": "echo first > notes.txt"})),
		step(llmtest.Say("Wrote notes.txt.")),
		step(llmtest.Call("recall", map[string]any{"query": "notes.txt first"})),
		step(llmtest.Call("bash", map[string]any{"command": "cat notes.txt"})),
		step(llmtest.Say("It says first.")),
	}})
	pasted := "\x1b[200~please write\nnotes.txt\n\x1b[201~\n" // a bracketed paste
	root := newRootCmd()
	var o, e strings.Builder
	root.SetIn(strings.NewReader(pasted + "/help\n/quit\n"))
	root.SetOut(&o)
	root.SetErr(&e)
	root.SetArgs([]string{"chat", "--session", "s1"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("chat: %v\n%s", err, e.String())
	}
	if !strings.Contains(o.String(), "Wrote notes.txt.") || !strings.Contains(e.String(), "/load SESSION") {
		t.Errorf("stdout %q\nstderr %q", o.String(), e.String())
	}
	reqs := fake.Requests()
	if first := reqs[0].Messages[0].PlainText(); first != "please write\nnotes.txt" {
		t.Errorf("the pasted block reached the model as %q", first)
	}
	// Resume: the history is sent again and the workspace is the same.
	root = newRootCmd()
	root.SetIn(strings.NewReader("what does it say?\n"))
	root.SetOut(&o)
	root.SetErr(&e)
	root.SetArgs([]string{"chat", "--session", "s1"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("chat resume: %v", err)
	}
	reqs = fake.Requests()
	last := reqs[len(reqs)-1]
	if len(last.Messages) < 5 || !strings.Contains(o.String(), "It says first.") {
		t.Errorf("resumed conversation sent %d messages; stdout %q", len(last.Messages), o.String())
	}
	// The recall index holds the first session's steps too.
	var recalled string
	for _, m := range last.Messages {
		for _, b := range m.Content {
			if b.Type == llm.BlockToolResult && strings.Contains(b.Text, "step ") && recalled == "" {
				recalled = b.Text
			}
		}
	}
	if !strings.Contains(recalled, "step 1 (") || !strings.Contains(recalled, "echo first") {
		t.Errorf("recall in the resumed session found no step of the first one: %q", recalled)
	}
	var h struct {
		Messages []llm.Message `json:"messages"`
	}
	b, err := os.ReadFile(filepath.Join(os.Getenv("AGENTBOX_DATA_DIR"), "chats", "s1", "history.json"))
	if err != nil || json.Unmarshal(b, &h) != nil || len(h.Messages) != 10 {
		t.Errorf("history: %d messages, %v", len(h.Messages), err)
	}
	assertNoSandboxes(t, instance)
}

func TestChatRefusesBadSessionName(t *testing.T) {
	sandboxEnv(t)
	useModel(t, llmtest.Script{})
	_, _, err := run(context.Background(), "chat", "--session", "../escape")
	var ee exitError
	if err == nil || errors.As(err, &ee) || !strings.Contains(err.Error(), "session name") {
		t.Fatalf("err = %v", err)
	}
}

func TestChatSessionIsExclusive(t *testing.T) {
	sandboxEnv(t)
	useModel(t, llmtest.Script{})
	dir := filepath.Join(os.Getenv("AGENTBOX_DATA_DIR"), "chats", "busy")
	os.MkdirAll(dir, 0o700)
	unlock, err := lockfile.Lock(dir, "session.lock", "held (pid %s): %s")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	_, _, err = run(context.Background(), "chat", "--session", "busy")
	if err == nil || !strings.Contains(err.Error(), "open in another agentbox chat") {
		t.Fatalf("err = %v", err)
	}
}

// TestRunDiskQuotaTellsTheModel: past run --disk, writes fail with ENOSPC
// inside, the model is told the quota is full, and the job goes on.
func TestRunDiskQuotaTellsTheModel(t *testing.T) {
	sandboxEnv(t)
	if os.Geteuid() != 0 {
		t.Skip("skipping: the kernel-enforced quota (a loop disk) needs root; CI runs as root")
	}
	useModel(t, llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("bash", map[string]any{"command": "dd if=/dev/zero of=big bs=1M count=200"})),
		step(when("disk quota is full", llmtest.Call("bash", map[string]any{"command": "rm big && echo freed"})),
			llmtest.Call("finish", map[string]any{"summary": "the model was not told"})),
		step(when("freed", llmtest.Call("finish", map[string]any{"summary": "told, and freed the space"})),
			llmtest.Call("finish", map[string]any{"summary": "could not free the space"})),
	}})
	out, errOut, err := run(context.Background(), "run", "--disk", "64m", "fill the disk")
	if err != nil || !strings.Contains(out, "No space left on device") || !strings.Contains(errOut, "result: told, and freed the space") {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if _, _, err := run(context.Background(), "run", "--disk", "1t", "x"); err == nil || !strings.Contains(err.Error(), "limits.disk 1TiB is over its ceiling 100GiB") {
		t.Errorf("run --disk 1t: %v, want the ceiling named", err)
	}
}
