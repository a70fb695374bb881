package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/chat"
	"github.com/agentbox/agentbox/internal/wiring"
)

func newChatCmd(a *app) *cobra.Command {
	var o wiring.ChatRequest
	var sb wiring.SandboxRequest
	var nf wiring.NetworkFlags
	var list bool
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Talk with the agent interactively in one sandbox, in your project or its own; sessions are saved and resumable",
		Long: `chat is an interactive session with the agent in one sandbox: each message
you send is worked on with the tools (shell, files, code) until the model
answers. The conversation and the workspace are saved under
<data dir>/chats/<session>/ after every step; --session or /load resumes
one, and leaving says how.

--workspace DIR (--workspace . for the directory you are in) starts the
session from DIR's files, as run does: the sandbox sees a copy of DIR at
/workspace, made in the session's directory, and DIR itself is never
modified (FIFOs, sockets and devices are not copied; symlinks are copied as
they are); leaving says where the copy is and how to compare it with DIR.
With --in-place the session works in DIR itself: the sandbox mounts it, its
files belong to the sandbox's uid while the session is open and to DIR's
owner again after it (this needs root); leaving names the symlinks the
agent left that lead out of DIR. A resumed session works on what it was
started on: no --workspace is needed, and another one is refused.

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
		Example: `  agentbox chat --workspace .
  sudo agentbox chat --workspace ~/proj --in-place
  agentbox chat --session flask-api --model anthropic:claude-sonnet-4-5
  agentbox chat --list
  agentbox chat --preset python --allow api.example.com --memory 4g`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if list {
				return wiring.ListChats(a.cfg, cmd.OutOrStdout())
			}
			if err := o.Check(a.cfg, sb, nf); err != nil {
				return err
			}
			return a.chat(cmd.Context(), o, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Session, "session", "", "session to start or resume (default: a new one named by the time)")
	fl.StringVar(&o.Model, "model", "", "model as provider:name (default AGENTBOX_MODEL)")
	fl.BoolVar(&list, "list", false, "list the saved sessions (what each works on, when saved, its last message) and exit")
	addProjectFlags(fl, &o.Project.Dir, &o.Project.InPlace)
	addSandboxFlags(fl, &sb)
	addNetworkFlags(fl, &nf, true)
	a.driverFlag(cmd)
	a.dataDirFlag(cmd, "where sessions are kept, under chats/")
	return cmd
}

// chat runs one interactive session; an interrupted turn exits 130.
func (a *app) chat(ctx context.Context, o wiring.ChatRequest, in io.Reader, out, errw io.Writer) error {
	interrupted, err := wiring.RunChat(ctx, a.cfg, a.log, o, in, out, errw)
	if interrupted {
		return exitError{130}
	}
	return err
}
