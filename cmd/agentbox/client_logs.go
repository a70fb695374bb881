package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/render"
)

func newLogsCmd(a *app) *cobra.Command {
	var f clientFlags
	var o render.FollowOptions
	var follow bool
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
			if follow && o.NoFollow {
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
	fl.BoolVarP(&follow, "follow", "f", false, "follow the job until it ends (the default)")
	fl.BoolVar(&o.NoFollow, "no-follow", false, "print the events so far and exit")
	fl.Int64Var(&o.After, "after", 0, "start after this event seq")
	fl.BoolVar(&o.JSON, "json", false, "print events as JSON lines")
	return cmd
}

// followJob shows the job's events and turns its outcome into the exit code.
func followJob(cmd *cobra.Command, c *client.Client, id string, o render.FollowOptions) error {
	return exitWith(render.Follow(cmd.Context(), c, id, o, cmd.OutOrStdout(), cmd.ErrOrStderr()))
}
