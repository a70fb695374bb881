package chat

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

// project makes a person's directory holding app.py.
func project(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "app.py"), []byte("print('hi')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// openAndSay opens session name, sends msgs and closes it.
func openAndSay(t *testing.T, cfg Config, name string, msgs ...string) *Session {
	t.Helper()
	s, err := Open(context.Background(), cfg, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background(), &scriptedInput{msgs: msgs}); err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
	return s
}

// TestSessionOnACopy: a new session with a project works on a copy of it
// in the session's own workspace (DIR unchanged); resumed without
// --workspace it is on the same copy; another project for it is refused;
// the project gone, it goes on, saying so.
func TestSessionOnACopy(t *testing.T) {
	cfg, d, _, errw := newConfig(t, llmtest.Steps(llmtest.Say("One."), llmtest.Say("Two.")))
	dir := project(t)
	cfg.Project = Project{Dir: dir}
	s := openAndSay(t, cfg, "p", "hello")
	ws := filepath.Join(cfg.Dir, "p", "workspace")
	if d.spec.Binding.WorkspaceDir != ws || !d.spec.Binding.ManagedWorkspace || s.WorkspaceDir() != ws || s.Project() != (Project{Dir: dir}) {
		t.Fatalf("sandbox on %q (managed %v), session workspace %q, project %+v", d.spec.Binding.WorkspaceDir, d.spec.Binding.ManagedWorkspace, s.WorkspaceDir(), s.Project())
	}
	if b, err := os.ReadFile(filepath.Join(ws, "app.py")); string(b) != "print('hi')\n" {
		t.Fatalf("the copy's app.py: %q, %v", b, err)
	}
	os.WriteFile(filepath.Join(ws, "app.py"), []byte("changed\n"), 0o644) // as the agent would

	cfg.Project = Project{}
	s = openAndSay(t, cfg, "p", "again")
	if d.spec.Binding.WorkspaceDir != ws || s.Project() != (Project{Dir: dir}) {
		t.Errorf("resumed on %q, project %+v", d.spec.Binding.WorkspaceDir, s.Project())
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "app.py")); string(b) != "changed\n" {
		t.Errorf("resuming made the copy again: app.py %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "app.py")); string(b) != "print('hi')\n" {
		t.Errorf("DIR's app.py changed: %q", b)
	}

	cfg.Project = Project{Dir: project(t)}
	if _, err := Open(context.Background(), cfg, "p"); err == nil || !strings.Contains(err.Error(), "session p works on a copy of "+dir) {
		t.Errorf("another project for p: %v", err)
	}
	cfg.Project = Project{Dir: dir}
	openAndSay(t, cfg, "p")

	os.RemoveAll(dir)
	cfg.Project = Project{}
	openAndSay(t, cfg, "p")
	if !strings.Contains(errw.String(), dir+", which this session's workspace is a copy of, is gone") {
		t.Errorf("no word of DIR gone:\n%s", errw.String())
	}
}

// TestSessionInPlace: in place, the sandbox mounts DIR itself, as the
// person's (not a workspace of the driver's); resumed, it is DIR again;
// DIR gone, the session is refused, saying so.
func TestSessionInPlace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("--in-place needs root")
	}
	cfg, d, _, _ := newConfig(t, llmtest.Steps(llmtest.Say("One.")))
	dir := project(t)
	cfg.Project = Project{Dir: dir, InPlace: true}
	s := openAndSay(t, cfg, "p", "hello")
	if d.spec.Binding.WorkspaceDir != dir || d.spec.Binding.ManagedWorkspace || s.WorkspaceDir() != dir {
		t.Fatalf("sandbox on %q (managed %v), session workspace %q", d.spec.Binding.WorkspaceDir, d.spec.Binding.ManagedWorkspace, s.WorkspaceDir())
	}
	if _, err := os.Lstat(filepath.Join(cfg.Dir, "p", "workspace")); err == nil {
		t.Errorf("an in-place session made a workspace of its own")
	}
	cfg.Project = Project{}
	openAndSay(t, cfg, "p")
	if d.spec.Binding.WorkspaceDir != dir || d.spec.Binding.ManagedWorkspace {
		t.Errorf("resumed on %q (managed %v)", d.spec.Binding.WorkspaceDir, d.spec.Binding.ManagedWorkspace)
	}
	cfg.Project = Project{Dir: dir}
	if _, err := Open(context.Background(), cfg, "p"); err == nil || !strings.Contains(err.Error(), "session p works on "+dir+" itself, not on a copy of "+dir) {
		t.Errorf("a copy asked of an in-place session: %v", err)
	}
	os.RemoveAll(dir)
	cfg.Project = Project{}
	if _, err := Open(context.Background(), cfg, "p"); err == nil || !strings.Contains(err.Error(), "works in "+dir+" itself, which is gone") {
		t.Errorf("DIR gone: %v", err)
	}
}

// TestSessionProjectRefused: a project holding the data dir, or missing,
// is refused before anything is made, and leaves no session behind.
func TestSessionProjectRefused(t *testing.T) {
	cfg, d, _, _ := newConfig(t, llmtest.Script{})
	for _, p := range []Project{{Dir: cfg.DataDir}, {Dir: filepath.Join(cfg.DataDir, "nope")}, {InPlace: true}} {
		cfg.Project = p
		if _, err := Open(context.Background(), cfg, "bad"); err == nil {
			t.Errorf("project %+v: no error", p)
		}
	}
	if _, err := os.Lstat(filepath.Join(cfg.Dir, "bad")); err == nil {
		t.Errorf("a refused session left its directory")
	}
	if d.created != 0 {
		t.Errorf("%d sandboxes created", d.created)
	}
	// A new session whose sandbox cannot be made leaves no copy behind.
	d.fail = errors.New("no such tier here")
	cfg.Project = Project{Dir: project(t)}
	if _, err := Open(context.Background(), cfg, "nosandbox"); err == nil || !strings.Contains(err.Error(), "no such tier") {
		t.Errorf("a sandbox that cannot be made: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(cfg.Dir, "nosandbox")); err == nil {
		t.Errorf("a session that could not start left its directory")
	}
}

// TestSessionsListing: the listing names each session with what it works
// on, how long ago it was saved and the user's last message, on one line,
// cut, the most recent first.
func TestSessionsListing(t *testing.T) {
	cfg, _, _, _ := newConfig(t, llmtest.Steps(llmtest.Say("One."), llmtest.Say("Two.")))
	dir := project(t)
	cfg.Project = Project{Dir: dir}
	openAndSay(t, cfg, "proj", "make the failing test pass\nand then some")
	cfg.Project = Project{}
	long := strings.Repeat("word ", 30)
	openAndSay(t, cfg, "plain", long)
	os.MkdirAll(filepath.Join(cfg.Dir, "not a session"), 0o755)

	list, err := List(cfg.Dir)
	if err != nil || len(list) != 2 || list[0].Name != "plain" || list[1].Name != "proj" {
		t.Fatalf("List: %+v, %v", list, err)
	}
	var sb strings.Builder
	if err := WriteSessions(&sb, list, "proj", list[1].Saved.Add(3*time.Minute+time.Second)); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(sb.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("listing:\n%s", sb.String())
	}
	for _, want := range []string{"* proj", "copy of " + dir, "3m ago", "make the failing test pass…"} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("proj's line lacks %q: %q", want, lines[2])
		}
	}
	if !strings.Contains(lines[1], "  plain") || !strings.Contains(lines[1], "its own") || !strings.Contains(lines[1], strings.Repeat("word ", 11)+"word…") {
		t.Errorf("plain's line: %q", lines[1])
	}
	if strings.Contains(sb.String(), "and then some") {
		t.Errorf("a second line of a message is listed:\n%s", sb.String())
	}
}

// TestLoadFailureKeepsTheSession: a /load that cannot open its session
// says why, and the conversation goes on in the session open before.
func TestLoadFailureKeepsTheSession(t *testing.T) {
	cfg, d, _, errw := newConfig(t, llmtest.Steps(llmtest.Say("Still in a.")))
	os.MkdirAll(filepath.Join(cfg.Dir, "b"), 0o755)
	os.WriteFile(filepath.Join(cfg.Dir, "b", metaFile), []byte("{not json"), 0o600)
	s := openAndSay(t, cfg, "a", "/load b", "hello")
	if s.Name() != "a" || !strings.Contains(errw.String(), "agentbox: /load b: session b: session.json") {
		t.Errorf("session %s after a failed /load; stderr:\n%s", s.Name(), errw.String())
	}
	if msgs := savedMessages(t, cfg, "a"); len(msgs) != 2 || msgs[0].PlainText() != "hello" {
		t.Errorf("a's conversation: %+v", msgs)
	}
	if d.created != d.destroyed {
		t.Errorf("%d sandboxes created, %d destroyed", d.created, d.destroyed)
	}
}
