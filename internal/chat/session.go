// Package chat owns an interactive session with the agent in one sandbox:
// opening or resuming it (its history, its lock, a sandbox on its
// workspace), the turns (the agent loop until the model hands the turn
// back), the /commands, and saving after every step. Sessions live in one
// directory each, <dir>/<name>/ with history.json, session.json (what it
// works on, its last message), session.lock and the workspace: empty at
// first, or a copy of a project directory, unless the session works in
// the project itself (in place). The caller builds the driver, the model
// and the tools and reads the user's messages through an Input; it owns
// flags and exit codes.
package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/agent"
	"github.com/agentbox/agentbox/internal/agent/tools"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/lockfile"
	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/workspace"
)

// ErrInterrupted means a turn stopped because its context was canceled
// (Ctrl-C); the session was saved first and can be resumed.
var ErrInterrupted = errors.New("chat interrupted")

// Config is what a session works with.
type Config struct {
	// Dir holds the sessions, one directory each (<data dir>/chats).
	Dir    string
	Driver sandbox.Driver
	Model  llm.Model
	// ModelSpec is the model as the user named it ("" for the default),
	// saved with the history.
	ModelSpec string
	Tools     []tools.Tool
	// ContextWindow overrides the model's context window, in tokens (0:
	// the model's own).
	ContextWindow int
	// Network is the session's egress policy, checked against the
	// operator's settings (chat --allow, --preset, ...).
	Network egress.Policy
	// Egress is the sandbox's way out under Network (nil: none at all).
	Egress Egress
	// Sandbox is what the session's sandbox is made with: limits, image,
	// tier (checked by the caller); the workspace and the environment are
	// the session's own.
	Sandbox sandbox.Spec
	// Project is what a new session works on (zero: an empty workspace
	// of its own); a saved session keeps what it was started on, and a
	// Project given for it must be the same.
	Project Project
	// DataDir is agentbox's data dir, which a project may neither hold
	// nor be in.
	DataDir string
	// MaxCopy bounds the bytes of a project's copy (0: the default).
	MaxCopy int64
	// Out gets the model's answers and what the tools did; Err the steps'
	// bookkeeping, the session's notes and the help.
	Out, Err io.Writer
}

// Session is one open chat session. It is not safe for concurrent use.
type Session struct {
	cfg   Config
	ws    *workspace.Local // the sessions' workspaces
	steps *render.Steps
	live  *render.Live // the spinner while a turn runs
	in    Input        // where Run reads the user's messages
	name  string
	dir   string
	// project is what the open session works on; notCopied what its copy,
	// made as it opened, left out.
	project   Project
	notCopied []string
	sb        sandbox.Sandbox
	loop      *agent.Loop
	unlock    func() // releases the session's lock
}

// history is what is saved of a session.
type history struct {
	Model    string        `json:"model"`
	Messages []llm.Message `json:"messages"`
	Usage    llm.Usage     `json:"usage"`
	Steps    int           `json:"steps"`
}

// historyFile is the prompt's history in a session's directory.
const historyFile = "prompt_history"

var sessionName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

const chatPrompt = `

This is an interactive session: the user reads your answers and replies. When you have done what the
last message asked, answer in plain text (without a tool call) to hand the turn back.`

// Open starts session name, or resumes it if it was saved before, and
// gives it a sandbox on its workspace. The session is locked until Close:
// another process cannot open it meanwhile.
func Open(ctx context.Context, cfg Config, name string) (*Session, error) {
	live := render.NewLive(cfg.Err, "Ctrl-C to cancel")
	s := &Session{cfg: cfg, ws: workspace.NewSessions(cfg.Dir), live: live, steps: render.NewSteps(live.Writer(cfg.Out), live.Writer(cfg.Err))}
	if err := s.open(ctx, name, cfg.Project); err != nil {
		return nil, err
	}
	return s, nil
}

// Name is the open session's name.
func (s *Session) Name() string { return s.name }

// WorkspaceDir is the open session's workspace on this host, for
// messages: the project directory itself in place.
func (s *Session) WorkspaceDir() string {
	if s.project.InPlace {
		return s.project.Dir
	}
	return s.ws.Dir(s.name)
}

// Where says where the session's sandbox works, for its first line: DIR
// (in place), a copy of DIR, or a workspace of its own.
func (s *Session) Where() string {
	switch {
	case s.project.InPlace:
		return s.project.Dir + " (in place)"
	case s.project.Dir != "":
		return s.WorkspaceDir() + " (a copy of " + s.project.Dir + ")"
	}
	return s.WorkspaceDir()
}

// Project is what the open session works on.
func (s *Session) Project() Project { return s.project }

// NotCopied names what the copy of the project, made as the session
// opened, left out, and why.
func (s *Session) NotCopied() []string { return s.notCopied }

// open loads (or starts) a session on want (see Config.Project) and
// gives it a sandbox on its workspace.
func (s *Session) open(ctx context.Context, name string, want Project) error {
	if !sessionName.MatchString(name) {
		return fmt.Errorf("session name %q: use letters, digits, '.', '_' and '-'", name)
	}
	dir := filepath.Join(s.cfg.Dir, name)
	made := !present(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("session dir: %w", err)
	}
	unlock, err := lockfile.Lock(dir, "session.lock", "the session is open in another agentbox chat (pid %s): %s")
	if err != nil {
		return err
	}
	if err := s.openLocked(ctx, name, dir, want); err != nil {
		if made { // a new session that failed to start leaves nothing
			_ = s.ws.Remove(context.WithoutCancel(ctx), name) // its copy, if made
			os.Remove(filepath.Join(dir, metaFile))
			os.Remove(filepath.Join(dir, "session.lock"))
			os.Remove(dir)
		}
		unlock()
		return err
	}
	s.unlock = unlock
	return nil
}

// openLocked opens session name, in dir, which the caller locked.
func (s *Session) openLocked(ctx context.Context, name, dir string, want Project) error {
	h, err := load(dir, name)
	if err != nil {
		return err
	}
	m, ok, err := loadMeta(dir)
	if err != nil {
		return err
	}
	var saved *meta
	if ok {
		saved = &m
	}
	s.notCopied = nil
	ws, own, err := s.workspaceFor(ctx, name, saved, want)
	if err != nil {
		return err
	}
	if err := writeMeta(dir, meta{Project: s.project, Last: lastSaid(h.Messages), Saved: time.Now()}); err != nil {
		return fmt.Errorf("session %s: %w", name, err)
	}
	b := sandbox.Binding{WorkspaceDir: ws, ManagedWorkspace: own}
	if s.cfg.Egress != nil {
		if b.Env, err = s.cfg.Egress.Prepare(); err != nil {
			return err
		}
	}
	sb, err := sandbox.Start(ctx, s.cfg.Driver, s.cfg.Sandbox, b)
	if err != nil {
		return err
	}
	s.sb = sb
	if s.cfg.Egress != nil {
		if err := s.cfg.Egress.Start(ctx, sb.Guest()); err != nil {
			s.removeSandbox(context.WithoutCancel(ctx))
			return err
		}
	}
	s.name, s.dir = name, dir
	return s.start(ctx, h)
}

func present(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// load reads the saved history of the session in dir, if there is one.
func load(dir, name string) (history, error) {
	var h history
	if b, err := os.ReadFile(filepath.Join(dir, "history.json")); err == nil {
		if err := json.Unmarshal(b, &h); err != nil {
			return h, fmt.Errorf("session %s: history.json: %w", name, err)
		}
	}
	return h, nil
}

// start makes the agent loop of the session's sandbox, going on from h.
func (s *Session) start(ctx context.Context, h history) error {
	s.loop = &agent.Loop{Model: s.cfg.Model, Tools: s.cfg.Tools, System: agent.SystemPrompt(s.effective()) + chatPrompt,
		Env: &tools.Env{Guest: s.sb.Guest(), SpillDir: agent.SpillDir, Network: s.denials()}, Emit: s.emit, Output: s.output, OnText: func(d string) { _ = s.steps.Text(d) },
		Messages: agent.CloseDangling(h.Messages, "interrupted before it finished"), Usage: h.Usage, Steps: h.Steps}
	if err := agent.EnableMemory(s.loop, s.cfg.ContextWindow); err != nil {
		s.removeSandbox(context.WithoutCancel(ctx))
		return err
	}
	if len(h.Messages) > 0 {
		agent.IndexHistory(s.loop) // so recall finds what the last sessions did
		fmt.Fprintf(s.cfg.Err, "resumed session %s: %d messages, %d steps so far\n", s.name, len(h.Messages), h.Steps)
	}
	return nil
}

// Egress is a session sandbox's way out: Prepare gives the environment
// its sandbox is made with, Start serves it once it runs, Stop ends it.
type Egress interface {
	Prepare() (map[string]string, error)
	Start(ctx context.Context, g *guest.Client) error
	Effective() egress.Effective
	Denied(since time.Time) []event.Network
	Stop() error
}

// effective is the session's policy as the prompt states it.
func (s *Session) effective() egress.Effective {
	if s.cfg.Egress == nil {
		return egress.Effective{Mode: egress.ModeNone}
	}
	return s.cfg.Egress.Effective()
}

// denials is what the tools ask about refused connections; nil without
// a proxy.
func (s *Session) denials() tools.NetworkDenials {
	if s.cfg.Egress == nil {
		return nil
	}
	return s.cfg.Egress
}

// Close saves the session, removes its sandbox and releases its lock. A
// session already closed (or whose /load failed) is left be.
func (s *Session) Close(ctx context.Context) {
	if s.unlock == nil {
		return
	}
	s.save()
	s.removeSandbox(ctx)
	s.unlock()
	s.unlock = nil
}

// removeSandbox stops the sandbox's egress and removes it, if there is one.
func (s *Session) removeSandbox(ctx context.Context) {
	if s.sb == nil {
		return
	}
	if s.cfg.Egress != nil {
		_ = s.cfg.Egress.Stop()
	}
	if err := s.sb.Destroy(ctx); err != nil {
		fmt.Fprintln(s.cfg.Err, "agentbox: removing the sandbox:", err)
	}
	s.sb = nil
}

// save writes the history and the session's record atomically; a
// failure is reported, not fatal.
func (s *Session) save() {
	b, _ := json.MarshalIndent(history{Model: s.cfg.ModelSpec, Messages: s.loop.Messages, Usage: s.loop.Usage, Steps: s.loop.Steps}, "", " ")
	tmp := filepath.Join(s.dir, ".history.json.tmp")
	err := os.WriteFile(tmp, b, 0o600)
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.dir, "history.json"))
	}
	if err == nil {
		err = writeMeta(s.dir, meta{Project: s.project, Last: lastSaid(s.loop.Messages), Saved: time.Now()})
	}
	if err != nil {
		fmt.Fprintln(s.cfg.Err, "agentbox: saving the session:", err)
	}
}

// lastSaid is the user's last message in msgs, one line, cut; "" if none.
func lastSaid(msgs []llm.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if m := msgs[i]; m.Role == llm.RoleUser {
			if text := strings.TrimSpace(m.PlainText()); text != "" {
				return oneLine(text, lastLen)
			}
		}
	}
	return ""
}

// emit shows the loop's events; the model's text was already streamed.
// The spinner says what the turn waits for.
func (s *Session) emit(p event.Payload) {
	s.live.Saw(p)
	if _, ok := p.(event.Model); ok {
		_ = s.steps.Text("\n")
		return
	}
	_ = s.steps.Payload(p)
}
