package main

import (
	"bufio"
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

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agentbox/agentbox/internal/agent"
	"github.com/agentbox/agentbox/internal/agent/tools"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/wiring"
	"github.com/agentbox/agentbox/internal/workspace"
)

const chatHelp = `Type a message and press Enter; a pasted block of several lines is one
message (end a line with \ to continue typing on the next one).
  /help            this help
  /clear           forget the conversation (the workspace stays)
  /load SESSION    switch to a saved session (its history and workspace)
  /sessions        list saved sessions
  /quit            save and leave (also Ctrl-D)`

// maxTurnSteps bounds the model steps of one chat turn.
const maxTurnSteps = 50

func newChatCmd(a *app) *cobra.Command {
	var session, model string
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Talk with the agent interactively in one sandbox; sessions are saved and resumable",
		Long: `chat is an interactive session with the agent in one sandbox: each message
you send is worked on with the tools (shell, files, code) until the model
answers. The conversation and the workspace are saved under
<data dir>/chats/<session>/ after every step; --session or /load resumes
one. A pasted multi-line block is one message (bracketed paste).

` + chatHelp,
		Example: `  agentbox chat
  agentbox chat --session flask-api --model anthropic:claude-sonnet-4-5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if session == "" {
				session = time.Now().Format("20060102-150405")
			}
			return a.chat(cmd.Context(), session, model, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "session to start or resume (default: a new one named by the time)")
	cmd.Flags().StringVar(&model, "model", "", "model as provider:name (default AGENTBOX_MODEL)")
	return cmd
}

// chat is one interactive session.
type chat struct {
	a      *app
	drv    sandbox.Driver
	ws     *workspace.Local // the sessions' workspaces
	model  llm.Model
	spec   string
	name   string
	dir    string
	sb     sandbox.Sandbox
	loop   *agent.Loop
	out    io.Writer
	errw   io.Writer
	shower *eventPrinter
	unlock func() // releases the session's lock
}

// chatHistory is what is saved of a session.
type chatHistory struct {
	Model    string        `json:"model"`
	Messages []llm.Message `json:"messages"`
	Usage    llm.Usage     `json:"usage"`
	Steps    int           `json:"steps"`
}

var sessionName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func (a *app) chat(ctx context.Context, session, spec string, in io.Reader, out, errw io.Writer) error {
	model, err := wiring.ModelResolver(a.cfg.Model)(spec)
	if err != nil {
		return err
	}
	drv, err := wiring.NewDriver(a.cfg, a.log, 1)
	if err != nil {
		return err
	}
	defer drv.Close()
	c := &chat{a: a, drv: drv, ws: workspace.NewSessions(filepath.Join(a.cfg.DataDir, "chats")), model: model, spec: spec,
		out: out, errw: errw, shower: &eventPrinter{out: out, errw: errw}}
	if err := c.open(ctx, session); err != nil {
		return err
	}
	defer func() { c.close(context.WithoutCancel(ctx)) }()
	fmt.Fprintf(errw, "agentbox chat: session %s, model %s, workspace %s (/help for commands)\n", c.name, model.Info().Name, c.ws.Dir(c.name))
	input := newInput(in, errw)
	defer input.close()
	return c.repl(ctx, input)
}

// open loads (or starts) a session and gives it a sandbox on its workspace.
func (c *chat) open(ctx context.Context, name string) error {
	if !sessionName.MatchString(name) {
		return fmt.Errorf("session name %q: use letters, digits, '.', '_' and '-'", name)
	}
	dir := filepath.Join(c.a.cfg.DataDir, "chats", name)
	ws, err := c.ws.Prepare(ctx, name)
	if err != nil {
		return fmt.Errorf("session dir: %w", err)
	}
	unlock, err := wiring.LockDir(dir, "session.lock", "the session is open in another agentbox chat (pid %s): %s")
	if err != nil {
		return err
	}
	var h chatHistory
	if b, err := os.ReadFile(filepath.Join(dir, "history.json")); err == nil {
		if err := json.Unmarshal(b, &h); err != nil {
			return fmt.Errorf("session %s: history.json: %w", name, err)
		}
	}
	sb, err := c.drv.Create(ctx, sandbox.Spec{WorkspaceDir: ws, ManagedWorkspace: true})
	if err != nil {
		unlock()
		return err
	}
	c.name, c.dir, c.sb, c.unlock = name, dir, sb, unlock
	c.loop = &agent.Loop{Model: c.model, Tools: wiring.Tools(c.a.cfg.Sandbox), System: agent.SystemPrompt() + chatPrompt,
		Env: &tools.Env{Guest: sb.Guest(), SpillDir: agent.SpillDir}, Emit: c.emit, OnText: func(d string) { io.WriteString(c.out, printable(d)) },
		Messages: agent.CloseDangling(h.Messages, "interrupted before it finished"), Usage: h.Usage, Steps: h.Steps}
	if err := agent.EnableMemory(c.loop, c.a.cfg.Agent.ContextWindow); err != nil {
		_ = sb.Destroy(context.WithoutCancel(ctx))
		c.sb = nil
		unlock()
		return err
	}
	if len(h.Messages) > 0 {
		agent.IndexHistory(c.loop) // so recall finds what the last sessions did
		fmt.Fprintf(c.errw, "resumed session %s: %d messages, %d steps so far\n", name, len(h.Messages), h.Steps)
	}
	return nil
}

const chatPrompt = `

This is an interactive session: the user reads your answers and replies. When you have done what the
last message asked, answer in plain text (without a tool call) to hand the turn back.`

func (c *chat) close(ctx context.Context) {
	c.save()
	if c.sb != nil {
		if err := c.sb.Destroy(ctx); err != nil {
			fmt.Fprintln(c.errw, "agentbox: removing the sandbox:", err)
		}
		c.sb = nil
	}
	if c.unlock != nil {
		c.unlock()
		c.unlock = nil
	}
}

// save writes the history atomically; a failure is reported, not fatal.
func (c *chat) save() {
	b, _ := json.MarshalIndent(chatHistory{Model: c.spec, Messages: c.loop.Messages, Usage: c.loop.Usage, Steps: c.loop.Steps}, "", " ")
	tmp := filepath.Join(c.dir, ".history.json.tmp")
	err := os.WriteFile(tmp, b, 0o600)
	if err == nil {
		err = os.Rename(tmp, filepath.Join(c.dir, "history.json"))
	}
	if err != nil {
		fmt.Fprintln(c.errw, "agentbox: saving the session:", err)
	}
}

// emit shows the loop's events; the model's text was already streamed.
func (c *chat) emit(p event.Payload) {
	if _, ok := p.(event.Model); ok {
		io.WriteString(c.out, "\n")
		return
	}
	typ, b, _ := event.Marshal(p)
	_ = c.shower.show(typ, b)
}

func (c *chat) repl(ctx context.Context, in *input) error {
	for {
		msg, err := in.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if strings.TrimSpace(msg) == "" {
			continue
		}
		if quit, err := c.command(ctx, msg); quit || err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// command handles a /command or sends msg to the model; quit ends the session.
func (c *chat) command(ctx context.Context, msg string) (quit bool, err error) {
	fields := strings.Fields(msg)
	if !strings.HasPrefix(msg, "/") || strings.Contains(strings.TrimSpace(msg), "\n") {
		return false, c.turn(ctx, msg)
	}
	switch fields[0] {
	case "/quit", "/exit":
		return true, nil
	case "/help":
		fmt.Fprintln(c.errw, chatHelp)
	case "/clear":
		c.loop.Messages = nil
		c.save()
		fmt.Fprintln(c.errw, "conversation cleared; the workspace is kept")
	case "/sessions":
		entries, _ := os.ReadDir(filepath.Join(c.a.cfg.DataDir, "chats"))
		for _, e := range entries {
			fmt.Fprintln(c.errw, e.Name())
		}
	case "/load":
		if len(fields) != 2 || !sessionName.MatchString(fields[1]) {
			fmt.Fprintln(c.errw, "usage: /load SESSION (letters, digits, '.', '_' and '-')")
			return false, nil
		}
		c.close(ctx)
		return false, c.open(ctx, fields[1])
	default:
		fmt.Fprintf(c.errw, "unknown command %s\n%s\n", fields[0], chatHelp)
	}
	return false, nil
}

// turn works on one user message until the model hands the turn back.
func (c *chat) turn(ctx context.Context, msg string) error {
	c.loop.Say(msg)
	for range maxTurnSteps {
		res, err := c.loop.Step(ctx)
		if err != nil {
			c.loop.Messages = agent.CloseDangling(c.loop.Messages, "interrupted")
			c.save()
			if ctx.Err() != nil {
				fmt.Fprintf(c.errw, "\ninterrupted; session saved: agentbox chat --session %s\n", c.name)
				return exitError{130}
			}
			fmt.Fprintln(c.errw, "agentbox:", err)
			return nil // the session goes on; the user may retry
		}
		c.save()
		if res.Finish != nil || res.ToolCalls == 0 {
			return nil
		}
	}
	fmt.Fprintf(c.errw, "[agentbox] stopped this turn after %d steps\n", maxTurnSteps)
	return nil
}

// input reads messages: a line, a bracketed paste (one message however many
// lines), or lines joined by a trailing backslash.
type input struct {
	r        *bufio.Reader
	prompt   io.Writer
	terminal bool
}

const (
	pasteStart = "\x1b[200~"
	pasteEnd   = "\x1b[201~"
)

func newInput(in io.Reader, prompt io.Writer) *input {
	i := &input{r: bufio.NewReader(in), prompt: prompt}
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		i.terminal = true
		fmt.Fprint(prompt, "\x1b[?2004h") // ask the terminal to mark pastes
	}
	return i
}

// close turns bracketed paste off again.
func (i *input) close() {
	if i.terminal {
		fmt.Fprint(i.prompt, "\x1b[?2004l")
	}
}

func (i *input) next() (string, error) {
	if i.terminal {
		fmt.Fprint(i.prompt, "\nyou> ")
	}
	var msg strings.Builder
	for {
		line, err := i.r.ReadString('\n')
		if strings.Contains(line, pasteStart) {
			line, err = i.paste(line, err)
		}
		if err != nil && line == "" {
			if msg.Len() > 0 {
				return msg.String(), nil
			}
			return "", err
		}
		trimmed := strings.TrimRight(line, "\r\n")
		if strings.HasSuffix(trimmed, "\\") && !strings.HasSuffix(trimmed, "\\\\") {
			msg.WriteString(strings.TrimSuffix(trimmed, "\\") + "\n")
			continue
		}
		msg.WriteString(trimmed)
		return msg.String(), nil
	}
}

// paste reads up to the end of a bracketed paste and returns it as one line.
func (i *input) paste(first string, err error) (string, error) {
	var sb strings.Builder
	sb.WriteString(strings.Replace(first, pasteStart, "", 1))
	for err == nil && !strings.Contains(sb.String(), pasteEnd) {
		var more string
		more, err = i.r.ReadString('\n')
		sb.WriteString(more)
	}
	text := strings.Replace(sb.String(), pasteEnd, "", 1)
	return strings.TrimRight(text, "\r\n") + "\n", err
}
