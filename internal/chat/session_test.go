package chat

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/anthropic"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// fakeDriver counts the sandboxes it creates and destroys, and keeps the
// spec of the last. Its sandboxes have no guest: the scripted models here
// call no tools.
type fakeDriver struct {
	sandbox.Driver
	mu                 sync.Mutex
	created, destroyed int
	spec               sandbox.Spec
	fail               error // what Create fails with, if set
}

func (d *fakeDriver) Create(_ context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail != nil {
		return nil, d.fail
	}
	d.created++
	d.spec = spec
	return fakeSandbox{d}, nil
}

// Capabilities: it binds at create, so the last spec holds the binding.
func (d *fakeDriver) Capabilities() sandbox.Capabilities { return sandbox.Capabilities{} }

type fakeSandbox struct{ d *fakeDriver }

func (fakeSandbox) Handle() sandbox.Handle { return sandbox.Handle{} }
func (fakeSandbox) Guest() *guest.Client   { return nil }
func (s fakeSandbox) Destroy(context.Context) error {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	s.d.destroyed++
	return nil
}

// newConfig is a session config over a fake driver and a scripted model.
func newConfig(t *testing.T, script llmtest.Script) (Config, *fakeDriver, *strings.Builder, *strings.Builder) {
	t.Helper()
	fake := llmtest.New(t, script)
	m, err := anthropic.New(anthropic.Config{Name: "claude-sonnet-4-5", APIKey: "k", BaseURL: fake.AnthropicURL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDriver{}
	var out, errw strings.Builder
	data := t.TempDir()
	return Config{Dir: filepath.Join(data, "chats"), DataDir: data, Driver: d, Model: m, ModelSpec: "anthropic:claude-sonnet-4-5", Out: &out, Err: &errw}, d, &out, &errw
}

func savedMessages(t *testing.T, cfg Config, name string) []llm.Message {
	t.Helper()
	var h history
	b, err := os.ReadFile(filepath.Join(cfg.Dir, name, "history.json"))
	if err != nil || json.Unmarshal(b, &h) != nil {
		t.Fatalf("history of %s: %v %s", name, err, b)
	}
	return h.Messages
}

func TestSessionCommands(t *testing.T) {
	cfg, d, out, errw := newConfig(t, llmtest.Steps(llmtest.Say("Hello there."), llmtest.Say("Second.")))
	s, err := Open(context.Background(), cfg, "s1")
	if err != nil {
		t.Fatal(err)
	}
	typed := "hello\n/clear\n/sessions\n/load s2\nhi again\n/bogus\n/quit\nnot read\n"
	if err := s.Run(context.Background(), NewLines(strings.NewReader(typed), &strings.Builder{})); err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
	if !strings.Contains(out.String(), "Hello there.") || !strings.Contains(out.String(), "Second.") {
		t.Errorf("stdout %q", out.String())
	}
	for _, want := range []string{"conversation cleared", "\n* s1       its own    just now  -\n", "unknown command /bogus"} {
		if !strings.Contains(errw.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errw.String())
		}
	}
	if n := len(savedMessages(t, cfg, "s1")); n != 0 {
		t.Errorf("s1 after /clear: %d messages saved", n)
	}
	if msgs := savedMessages(t, cfg, "s2"); len(msgs) != 2 || msgs[0].PlainText() != "hi again" {
		t.Errorf("s2: %+v", msgs)
	}
	if d.created != 2 || d.destroyed != 2 {
		t.Errorf("sandboxes: %d created, %d destroyed", d.created, d.destroyed)
	}
}

func TestInterruptedTurnIsSaved(t *testing.T) {
	cfg, d, _, _ := newConfig(t, llmtest.Steps(llmtest.Turn{Text: "thinking", Stall: true}))
	s, err := Open(context.Background(), cfg, "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := s.Run(ctx, NewLines(strings.NewReader("go\n"), &strings.Builder{})); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("run: %v, want ErrInterrupted", err)
	}
	if msgs := savedMessages(t, cfg, "s1"); len(msgs) == 0 || msgs[0].PlainText() != "go" {
		t.Errorf("saved %+v", msgs)
	}
	s.Close(context.Background())
	if d.destroyed != 1 {
		t.Errorf("%d sandboxes destroyed", d.destroyed)
	}
}

func TestOpenRefusesBadNamesAndOpenSessions(t *testing.T) {
	cfg, d, _, _ := newConfig(t, llmtest.Script{})
	if _, err := Open(context.Background(), cfg, "../escape"); err == nil || !strings.Contains(err.Error(), "session name") {
		t.Errorf("bad name: %v", err)
	}
	s, err := Open(context.Background(), cfg, "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if _, err := Open(context.Background(), cfg, "s1"); err == nil || !strings.Contains(err.Error(), "open in another agentbox chat") {
		t.Errorf("second open: %v", err)
	}
	if d.created != 1 {
		t.Errorf("%d sandboxes created", d.created)
	}
}

// scriptedInput types messages one by one and can interrupt a turn.
type scriptedInput struct {
	msgs []string
	irq  chan struct{}
	path string // the history file the session pointed it at
}

func (in *scriptedInput) Next(context.Context) (string, error) {
	if len(in.msgs) == 0 {
		return "", io.EOF
	}
	m := in.msgs[0]
	in.msgs = in.msgs[1:]
	return m, nil
}

func (in *scriptedInput) Interrupts() <-chan struct{} { return in.irq }

func (in *scriptedInput) UseHistory(path string) error { in.path = path; return nil }

// watchWriter calls fire once what was written holds want.
type watchWriter struct {
	mu    sync.Mutex
	sb    strings.Builder
	want  string
	fire  func()
	fired bool
}

func (w *watchWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sb.Write(b)
	if !w.fired && strings.Contains(w.sb.String(), w.want) {
		w.fired = true
		w.fire()
	}
	return len(b), nil
}

func TestInterruptCancelsTheTurnOnly(t *testing.T) {
	cfg, d, _, errw := newConfig(t, llmtest.Steps(llmtest.Turn{Text: "working on it", Stall: true}, llmtest.Say("Going on.")))
	in := &scriptedInput{msgs: []string{"first", "second"}, irq: make(chan struct{}, 1)}
	// Interrupt once the stalled answer has started to stream.
	cfg.Out = &watchWriter{want: "working on it", fire: func() { in.irq <- struct{}{} }}
	s, err := Open(context.Background(), cfg, "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if err := s.Run(context.Background(), in); err != nil {
		t.Fatalf("run: %v", err)
	}
	msgs := savedMessages(t, cfg, "s1")
	var users []string
	for _, m := range msgs {
		if m.Role == llm.RoleUser && m.PlainText() != "" {
			users = append(users, m.PlainText())
		}
	}
	if len(users) != 2 || users[0] != "first" || users[1] != "second" || msgs[len(msgs)-1].PlainText() != "Going on." {
		t.Errorf("conversation after the cancel: %+v", msgs)
	}
	if !strings.Contains(errw.String(), "canceled; sandbox and conversation kept") {
		t.Errorf("stderr: %s", errw.String())
	}
	if d.created != 1 || d.destroyed != 0 {
		t.Errorf("sandboxes: %d created, %d destroyed before Close", d.created, d.destroyed)
	}
	if in.path != filepath.Join(cfg.Dir, "s1", historyFile) {
		t.Errorf("history at %q", in.path)
	}
}

// waitingInput waits at the prompt until its context ends, as the line
// editor does.
type waitingInput struct{}

func (waitingInput) Next(ctx context.Context) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

// TestInterruptedAtThePrompt: a SIGTERM or SIGINT while chat waits at the
// prompt ends it as one during a turn does (saved, exit 130), not as a
// failure "context canceled".
func TestInterruptedAtThePrompt(t *testing.T) {
	cfg, _, _, _ := newConfig(t, llmtest.Script{})
	s, err := Open(context.Background(), cfg, "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx, waitingInput{}); !errors.Is(err, ErrInterrupted) {
		t.Errorf("run: %v, want ErrInterrupted", err)
	}
}
