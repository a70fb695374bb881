package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// projectDir makes a person's project: notes.txt, owned by uid.
func projectDir(t *testing.T, uid int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("PROJECT-NOTE-4217\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "notes.txt")} {
		if err := os.Lchown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestChatWorkspaceInATerminal: `agentbox chat --workspace .`, run in a
// project in a real terminal, gives the agent the project at /workspace
// (a file read with read_file shows on the screen), on a copy: what the
// agent writes is not in the project. /sessions lists the session with
// its workspace, age and last message; leaving says how to resume it and
// where the copy is; resumed from elsewhere without --workspace, it is on
// the same copy.
func TestChatWorkspaceInATerminal(t *testing.T) {
	sandboxEnv(t)
	fake := useModel(t, llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("read_file", map[string]any{"path": "notes.txt"})),
		step(llmtest.Call("write_file", map[string]any{"path": "made.txt", "content": "by the agent\n"})),
		step(llmtest.Say("Read and wrote.")),
		step(llmtest.Call("bash", map[string]any{"command": "cat /workspace/made.txt /workspace/notes.txt | tr a-z A-Z"})),
		step(llmtest.Say("Still here.")),
	}})
	dir := projectDir(t, os.Getuid())
	tty := testenv.StartTmux(t, 250, 50, nil, "env", "-C", dir, guestBinary, "chat", "--session", "proj", "--workspace", ".")
	screen := tty.WaitFor("the prompt", time.Minute, atPrompt)
	ws := filepath.Join(os.Getenv("AGENTBOX_DATA_DIR"), "chats", "proj", "workspace")
	if !strings.Contains(screen, "workspace "+ws+" (a copy of "+dir+")") {
		t.Errorf("the first line does not say what the session works on:\n%s", screen)
	}
	tty.Type("read the notes")
	tty.Keys("Enter")
	screen = tty.WaitFor("the answer", time.Minute, func(s string) bool { return strings.Contains(s, "Read and wrote.") && atPrompt(s) })
	if !strings.Contains(screen, "▶ read notes.txt") || !strings.Contains(screen, "PROJECT-NOTE-4217") {
		t.Errorf("the project's file is not on the screen:\n%s", screen)
	}
	if !resultHolds(fake.Requests()[1].Messages, "PROJECT-NOTE-4217") {
		t.Errorf("the model was not given the file: %+v", fake.Requests()[1].Messages)
	}
	if _, err := os.Lstat(filepath.Join(dir, "made.txt")); err == nil {
		t.Errorf("the agent wrote into the project, not its copy")
	}

	tty.Type("/sessions")
	tty.Keys("Enter")
	screen = tty.WaitFor("the listing", 10*time.Second, func(s string) bool { return strings.Contains(s, "LAST MESSAGE") && atPrompt(s) })
	line := lineWith(screen, "* proj")
	for _, want := range []string{"copy of " + dir, "just now", "read the notes"} {
		if !strings.Contains(line, want) {
			t.Errorf("the session's line in /sessions lacks %q: %q\n%s", want, line, screen)
		}
	}

	tty.Keys("C-d")
	screen = tty.WaitFor("chat to leave", 30*time.Second, func(s string) bool { _, done := tty.Exited(); return done && strings.Contains(s, "diff -ru") })
	for _, want := range []string{
		"session saved; resume it with: agentbox chat --session proj\n",
		"workspace: " + ws + " (a copy of " + dir + ", which is unchanged)\n",
		"to see the changes: diff -ru --no-dereference " + dir + " " + ws + "\n",
	} {
		if !strings.Contains(screen, want) {
			t.Errorf("leaving does not say %q:\n%s", want, screen)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "made.txt")); string(b) != "by the agent\n" {
		t.Errorf("the copy's made.txt: %q, %v", b, err)
	}

	again := testenv.StartTmux(t, 250, 50, nil, guestBinary, "chat", "--session", "proj")
	screen = again.WaitFor("the prompt", time.Minute, atPrompt)
	if !strings.Contains(screen, "(a copy of "+dir+")") {
		t.Errorf("the resumed session does not say what it works on:\n%s", screen)
	}
	again.Type("still there?")
	again.Keys("Enter")
	screen = again.WaitFor("the answer", time.Minute, func(s string) bool { return strings.Contains(s, "Still here.") && atPrompt(s) })
	if !strings.Contains(screen, "BY THE AGENT") || !strings.Contains(screen, "PROJECT-NOTE-4217") {
		t.Errorf("the resumed session is not on the same copy:\n%s", screen)
	}
	again.Keys("C-d")
	again.WaitFor("chat to leave", 30*time.Second, func(string) bool { _, done := again.Exited(); return done })
}

// resultHolds reports whether a tool result in msgs holds s.
func resultHolds(msgs []llm.Message, s string) bool {
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == llm.BlockToolResult && strings.Contains(b.Text, s) {
				return true
			}
		}
	}
	return false
}

// lineWith is the screen's first line holding s, or "".
func lineWith(screen, s string) string {
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// TestChatWorkspaceInPlace: with --in-place the agent works in DIR
// itself: the file it writes is in DIR afterwards, DIR's owner's again,
// and leaving says so, with how to resume.
func TestChatWorkspaceInPlace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("--in-place needs root")
	}
	instance := sandboxEnv(t)
	useModel(t, llmtest.Steps(
		llmtest.Call("bash", map[string]any{"command": "cat notes.txt && echo written > out.txt && ln -s /etc/passwd leak"}),
		llmtest.Say("Done."),
	))
	const owner = 4321
	dir := projectDir(t, owner)
	cmd := exec.Command(guestBinary, "chat", "--session", "inplace", "--workspace", dir, "--in-place")
	cmd.Stdin = strings.NewReader("write out.txt\n")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("chat: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "PROJECT-NOTE-4217") {
		t.Errorf("the agent did not see DIR's file:\n%s", out.String())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out.txt")); string(b) != "written\n" {
		t.Errorf("out.txt in DIR: %q, %v", b, err)
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		if st.Uid != owner || st.Gid != owner {
			t.Errorf("%s is owned by %d:%d after the session, want %d:%d", p, st.Uid, st.Gid, owner, owner)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"session saved; resume it with: agentbox chat --session inplace\n",
		"workspace: " + dir + " (changed in place)\n",
		"leak -> /etc/passwd",
	} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("leaving does not say %q:\n%s", want, errOut.String())
		}
	}
	if _, err := os.Lstat(filepath.Join(os.Getenv("AGENTBOX_DATA_DIR"), "chats", "inplace", "workspace")); err == nil {
		t.Errorf("an in-place session made a copy")
	}
	assertNoSandboxes(t, instance)
}

// TestChatAndRunShareSandboxFlags: chat takes the sandbox, project and
// network flags of run, with the same types and help, so that a change to
// one is a change to both.
func TestChatAndRunShareSandboxFlags(t *testing.T) {
	root := newRootCmd()
	find := func(name string) *cobra.Command {
		c, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	chat, run := find("chat"), find("run")
	for _, name := range []string{"memory", "cpus", "disk", "image", "isolation", "workspace", "in-place",
		"allow", "deny", "preset", "secret", "network", "model", "driver"} {
		c, r := chat.Flags().Lookup(name), run.Flags().Lookup(name)
		switch {
		case c == nil || r == nil:
			t.Errorf("--%s: on chat %v, on run %v", name, c != nil, r != nil)
		case c.Value.Type() != r.Value.Type() || c.DefValue != r.DefValue:
			t.Errorf("--%s: chat's is %s (default %q), run's %s (default %q)", name, c.Value.Type(), c.DefValue, r.Value.Type(), r.DefValue)
		case c.Usage != r.Usage && name != "model":
			t.Errorf("--%s: chat's help %q, run's %q", name, c.Usage, r.Usage)
		}
	}
}

// TestChatSandboxFlags: chat's --memory and --cpus reach its sandbox;
// bad values are refused before anything starts, naming the flag.
func TestChatSandboxFlags(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		t.Setenv("AGENTBOX_DATA_DIR", t.TempDir())
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--isolation", "nope"}, "isolation"},
			{[]string{"--memory", "lots"}, "--memory"},
			{[]string{"--cpus", "-1"}, "--cpus"},
			{[]string{"--image", "not-allowed:1"}, "not one the operator allows"},
			{[]string{"--in-place"}, "--in-place goes with --workspace DIR"},
		} {
			_, _, err := run(t.Context(), append([]string{"chat"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("chat %v: %v; want it to say %q", tc.args, err, tc.want)
			}
		}
	})
	t.Run("applied", func(t *testing.T) {
		sandboxEnv(t)
		useModel(t, llmtest.Steps(
			llmtest.Call("bash", map[string]any{"command": "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes; " +
				"cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)"}),
			llmtest.Say("Limits read."),
		))
		cmd := exec.Command(guestBinary, "chat", "--session", "limits", "--memory", "300m", "--cpus", "0.5")
		cmd.Stdin = strings.NewReader("what are your limits?\n")
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("chat: %v\n%s", err, errOut.String())
		}
		for _, want := range []string{strconv.Itoa(300 << 20), "50000 100000"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("the sandbox's cgroup lacks %q:\n%s", want, out.String())
			}
		}
	})
}
