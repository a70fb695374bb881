package wiring

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/chat"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/sandbox"
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
