package wiring

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/agentbox/agentbox/internal/chat"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/workspace"
)

// ChatRequest is what `agentbox chat` is asked for.
type ChatRequest struct {
	// Session is the session to start or resume; Model the model as
	// provider:name ("" for the configured one).
	Session, Model string
	// Project is --workspace and --in-place as typed.
	Project chat.Project
	// Sandbox is the sandbox's limits, image and tier, checked.
	Sandbox sandbox.Spec
	// Network is the egress policy, checked.
	Network egress.Policy
}

// Check completes r from chat's flags, each mistake said in this order:
// the session, named by the time if none is; the project directory; the
// network policy nf asks for; the sandbox sb asks for.
func (r *ChatRequest) Check(cfg config.Config, sb SandboxRequest, nf NetworkFlags) error {
	if r.Session == "" {
		r.Session = time.Now().Format("20060102-150405")
	}
	// Checked here, so that a bad one is said first; the session
	// checks it again as it opens (on a saved one, what it had).
	if _, err := workspace.ProjectDir(r.Project.Dir, cfg.DataDir, r.Project.InPlace); err != nil {
		return err
	}
	var err error
	if r.Network, err = nf.Check(cfg); err != nil {
		return err
	}
	r.Sandbox, err = sb.Spec(cfg)
	return err
}

// ChatsDir holds cfg's chat sessions.
func ChatsDir(cfg config.Config) string { return filepath.Join(cfg.DataDir, "chats") }

// OpenChat opens the session r asks for, on the configured driver, the
// model r names and an egress proxy of its own; out and errw are the
// session's streams. It returns the session, the model's name and what
// closes the session, then the driver.
func OpenChat(ctx context.Context, cfg config.Config, log *slog.Logger, r ChatRequest, out, errw io.Writer) (*chat.Session, string, func(), error) {
	model, err := ModelResolver(cfg.Model)(r.Model)
	if err != nil {
		return nil, "", nil, err
	}
	drv, err := NewDriver(cfg, log, 1)
	if err != nil {
		return nil, "", nil, err
	}
	proxy, err := NewLocalEgress(cfg, "chat", r.Network, errw, log)
	if err != nil {
		drv.Close()
		return nil, "", nil, err
	}
	s, err := chat.Open(ctx, chat.Config{Dir: ChatsDir(cfg), Driver: drv, Model: model, ModelSpec: r.Model,
		Tools: Tools(cfg.Sandbox), ContextWindow: cfg.Agent.ContextWindow, Network: r.Network, Egress: proxy,
		Sandbox: r.Sandbox, Project: r.Project, DataDir: cfg.DataDir, MaxCopy: cfg.Server.MaxUpload, Out: out, Err: errw}, r.Session)
	if err != nil {
		drv.Close()
		return nil, "", nil, err
	}
	return s, model.Info().Name, func() { s.Close(context.WithoutCancel(ctx)); drv.Close() }, nil
}

// RunChat runs the interactive session r asks for, reading messages from
// in, and says as it closes how to resume it and where its work is. It
// reports whether a turn was interrupted (Ctrl-C), which ends the session.
func RunChat(ctx context.Context, cfg config.Config, log *slog.Logger, r ChatRequest, in io.Reader, out, errw io.Writer) (interrupted bool, err error) {
	s, model, closeAll, err := OpenChat(ctx, cfg, log, r, out, errw)
	if err != nil {
		return false, err
	}
	defer closeAll()
	fmt.Fprintf(errw, "agentbox chat: session %s, model %s, workspace %s (/help for commands)\n", s.Name(), model, render.Printable(s.Where()))
	input, closeInput, err := chat.OpenInput(in, errw)
	if err != nil {
		return false, err
	}
	defer closeInput.Close()
	err = s.Run(ctx, input)
	interrupted = errors.Is(err, chat.ErrInterrupted)
	if err != nil && !interrupted {
		return false, err
	}
	s.Close(context.WithoutCancel(ctx)) // the sandbox gone, an in-place DIR is its owner's again
	leaveChat(errw, s, interrupted)
	return interrupted, nil
}

// ListChats prints cfg's saved sessions (chat --list).
func ListChats(cfg config.Config, w io.Writer) error {
	list, err := chat.List(ChatsDir(cfg))
	if err != nil {
		return err
	}
	return chat.WriteSessions(w, list, "", time.Now())
}

// leaveChat says, as the session closes, how to resume it and where its
// work is: in DIR itself, or in the copy, and how to compare it with DIR.
func leaveChat(w io.Writer, s *chat.Session, interrupted bool) {
	if interrupted {
		fmt.Fprint(w, "\ninterrupted; ")
	}
	fmt.Fprintf(w, "session saved; resume it with: agentbox chat --session %s\n", s.Name())
	p := s.Project()
	r := RunReport{Workspace: s.WorkspaceDir(), From: p.Dir, InPlace: p.InPlace, NotCopied: s.NotCopied()}
	if p.InPlace {
		r.LinksOut = workspace.DescribeLinksOut(p.Dir)
	}
	r.WriteWhere(w)
	if p.Dir != "" && !p.InPlace {
		fmt.Fprintf(w, "to see the changes: diff -ru --no-dereference %s %s\n", render.Printable(render.ShellQuote(p.Dir)), render.Printable(render.ShellQuote(r.Workspace)))
	}
}
