package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/chat"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/wiring"
)

func newChatCmd(a *app) *cobra.Command {
	var session, model string
	var nf wiring.NetworkFlags
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Talk with the agent interactively in one sandbox; sessions are saved and resumable",
		Long: `chat is an interactive session with the agent in one sandbox: each message
you send is worked on with the tools (shell, files, code) until the model
answers. The conversation and the workspace are saved under
<data dir>/chats/<session>/ after every step; --session or /load resumes
one.

On a terminal the prompt is a line editor: a pasted block is one message
(shown as typed, or as "[pasted N lines]" when long; Ctrl-O expands it);
Alt-Enter or a trailing \ starts a new line and Enter sends; Up and Down
recall earlier messages (kept per session across runs); Ctrl-C clears the
line, or cancels the running turn (the sandbox and the conversation stay);
Ctrl-D on an empty line leaves. While the model works a spinner shows the
time elapsed, and each turn ends with a line of its steps, tokens, cost and
context size. From a pipe or a script, messages are read a line at a time
(a trailing \ continues one) with the same commands.

` + chat.Help + networkHelp,
		Example: `  agentbox chat
  agentbox chat --session flask-api --model anthropic:claude-sonnet-4-5
  agentbox chat --preset python --allow api.example.com`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if session == "" {
				session = time.Now().Format("20060102-150405")
			}
			network, err := nf.Policy(a.cfg.Egress.Policy)
			if err != nil {
				return err
			}
			return a.chat(cmd.Context(), chatOptions{session: session, model: model, network: network}, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "session to start or resume (default: a new one named by the time)")
	cmd.Flags().StringVar(&model, "model", "", "model as provider:name (default AGENTBOX_MODEL)")
	addNetworkFlags(cmd.Flags(), &nf, true)
	a.driverFlag(cmd)
	a.dataDirFlag(cmd, "where sessions are kept, under chats/")
	return cmd
}

// chatOptions are what `agentbox chat` was asked for.
type chatOptions struct {
	session, model string
	// network is the egress policy, checked.
	network egress.Policy
}

// chat runs one interactive session; an interrupted turn exits 130.
func (a *app) chat(ctx context.Context, o chatOptions, in io.Reader, out, errw io.Writer) error {
	session, spec := o.session, o.model
	model, err := wiring.ModelResolver(a.cfg.Model)(spec)
	if err != nil {
		return err
	}
	drv, err := wiring.NewDriver(a.cfg, a.log, 1)
	if err != nil {
		return err
	}
	defer drv.Close()
	proxy, err := wiring.NewLocalEgress(a.cfg, "chat", o.network, errw, a.log)
	if err != nil {
		return err
	}
	s, err := chat.Open(ctx, chat.Config{Dir: filepath.Join(a.cfg.DataDir, "chats"), Driver: drv, Model: model, ModelSpec: spec,
		Tools: wiring.Tools(a.cfg.Sandbox), ContextWindow: a.cfg.Agent.ContextWindow, Network: o.network, Egress: proxy, Out: out, Err: errw}, session)
	if err != nil {
		return err
	}
	defer func() { s.Close(context.WithoutCancel(ctx)) }()
	fmt.Fprintf(errw, "agentbox chat: session %s, model %s, workspace %s (/help for commands)\n", s.Name(), model.Info().Name, s.WorkspaceDir())
	input, closeInput, err := chat.OpenInput(in, errw)
	if err != nil {
		return err
	}
	defer closeInput.Close()
	err = s.Run(ctx, input)
	if errors.Is(err, chat.ErrInterrupted) {
		fmt.Fprintf(errw, "\ninterrupted; session saved: agentbox chat --session %s\n", s.Name())
		return exitError{130}
	}
	return err
}
