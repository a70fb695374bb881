package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/wire"
)

// logsOptions are the options of `agentbox logs` (and submit --follow).
type logsOptions struct {
	follow, noFollow, json bool
	after                  int64
	// summary ends the steps with how the job ended, as run does
	// (submit --follow, reply --follow).
	summary bool
}

func newLogsCmd(a *app) *cobra.Command {
	var f clientFlags
	var o logsOptions
	cmd := &cobra.Command{
		Use:   "logs [flags] JOB_ID",
		Short: "Print a job's steps as they happen",
		Long: `logs follows a job's event stream and prints each step as it happens: what
the job produced (its commands' output, the model's text, tool results) on
stdout; state changes, commands, tool calls and exit codes as short lines on
stderr. It returns when the job ends, exiting 0 if the job completed and 1
otherwise. A dropped connection is resumed where it broke.

What the sandbox or the model wrote is printed without its control
characters, so it cannot drive the terminal: an escape sequence's ESC is
dropped and its other characters stay as text. agentbox's own colours and
its spinner go to a terminal only: 'logs JOB > file' saves the stdout side
as plain text, the steps still showing on the terminal.

-f (--follow) is what logs does anyway; --no-follow prints what exists now
and exits (0 only if the job completed).
--json prints each event as one JSON object per line instead.` + clientEnvHelp,
		Example: `  agentbox logs job_0193b2c4d5e6f7a8b9c
  agentbox logs --no-follow job_0193b2c4d5e6f7a8b9c > output.txt
  agentbox logs --json job_0193b2c4d5e6f7a8b9c | jq -c 'select(.type=="command")'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.follow && o.noFollow {
				return usage(errors.New("--follow and --no-follow: give one"))
			}
			c, err := a.newClient(f)
			if err != nil {
				return err
			}
			return followJob(cmd, c, args[0], o)
		},
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.BoolVarP(&o.follow, "follow", "f", false, "follow the job until it ends (the default)")
	fl.BoolVar(&o.noFollow, "no-follow", false, "print the events so far and exit")
	fl.Int64Var(&o.after, "after", 0, "start after this event seq")
	fl.BoolVar(&o.json, "json", false, "print events as JSON lines")
	return cmd
}

// followJob prints the job's events and turns its outcome into the exit code.
func followJob(cmd *cobra.Command, c *client.Client, id string, o logsOptions) error {
	ctx := cmd.Context()
	live := render.NewLive(cmd.ErrOrStderr(), "Ctrl-C stops following; the job goes on")
	steps := render.NewSteps(live.Writer(cmd.OutOrStdout()), live.Writer(cmd.ErrOrStderr()))
	show := func(ev wire.Event) error { live.Follow(ev.Type, ev.Payload); return steps.Show(ev.Type, ev.Payload) }
	if !o.json && !o.noFollow {
		live.Start("waiting")
	}
	if o.json {
		enc := json.NewEncoder(cmd.OutOrStdout())
		show = func(ev wire.Event) error { return enc.Encode(ev) }
	}
	read := c.Follow
	if o.noFollow {
		read = c.ReadEvents
	}
	err := read(ctx, id, o.after, show)
	live.Stop()
	if ctx.Err() != nil {
		return exitError{130}
	}
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	j, err := c.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	switch {
	case o.json:
	case o.summary && ended(j.Status):
		_ = render.Summary(cmd.ErrOrStderr(), j)
		if j.DeletedAt.IsZero() {
			fmt.Fprintf(cmd.ErrOrStderr(), "download: agentbox download %s\ndiff: agentbox diff %s\n", id, id)
		}
	default:
		_ = render.Outcome(cmd.ErrOrStderr(), id, j)
	}
	if j.Status == "complete" {
		return nil
	}
	return exitError{1}
}

// ended reports whether a job in status s has ended.
func ended(s string) bool { return s == "complete" || s == "error" || s == "canceled" }
