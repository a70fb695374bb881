package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/wiring"
)

// replyFlags are the options of `agentbox reply`.
type replyFlags struct {
	clientFlags
	follow, json bool
}

func newReplyCmd(a *app) *cobra.Command {
	var f replyFlags
	cmd := &cobra.Command{
		Use:   "reply [flags] JOB_ID MESSAGE",
		Short: "Continue a job: a follow-up once it ended, or a steer while it runs",
		Long: `reply sends MESSAGE to a job. A job that ended (complete, error or canceled)
starts a new turn in the same workspace, in a new sandbox, with the whole
conversation so far and MESSAGE last; its limits apply to each turn. A job
still pending or running gets MESSAGE at its next step, after the results of
the step under way. A MESSAGE of - reads it from stdin.

With --follow it then streams the job's steps from the message on, like
'agentbox logs', until the turn ends, and exits 0 only if it completed.
A job whose data was deleted cannot be continued, nor can a job of a server
running the shell agent.` + clientEnvHelp,
		Example: `  agentbox reply job_0193b2c4d5e6f7a8b9c "Now add a test for the empty case"
  agentbox reply -f job_0193b2c4d5e6f7a8b9c "Use pathlib instead of os.path"
  agentbox reply job_0193b2c4d5e6f7a8b9c - < review-notes.txt`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error { return a.reply(cmd, f, args[0], args[1]) },
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.BoolVarP(&f.follow, "follow", "f", false, "stream the job's steps from the message on until the turn ends")
	fl.BoolVar(&f.json, "json", false, "print the job as JSON (with --follow: then one event per line)")
	return cmd
}

func (a *app) reply(cmd *cobra.Command, f replyFlags, id, message string) error {
	message, err := wiring.TextArg(cmd.InOrStdin(), message, "message")
	if err != nil {
		return err
	}
	c, err := a.newClient(f.clientFlags)
	if err != nil {
		return err
	}
	j, after, err := c.Reply(cmd.Context(), id, message)
	if err != nil {
		return fmt.Errorf("reply: %w", err)
	}
	switch {
	case f.json:
		err = json.NewEncoder(cmd.OutOrStdout()).Encode(j)
	case f.follow:
		fmt.Fprintf(cmd.ErrOrStderr(), "sent to %s (turn %d, %s)\n", j.JobID, j.Turn, j.Status)
	default:
		fmt.Fprintf(cmd.OutOrStdout(), "%s: message sent (turn %d, %s)\n", j.JobID, j.Turn, j.Status)
	}
	if err != nil || !f.follow {
		return err
	}
	return followJob(cmd, c, j.JobID, render.FollowOptions{JSON: f.json, After: after, Summary: true})
}
