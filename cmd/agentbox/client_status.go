package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/wire"
)

func newStatusCmd(a *app) *cobra.Command {
	var f answerFlags
	cmd := &cobra.Command{
		Use:   "status [flags] JOB_ID",
		Short: "Show a job's status, progress, usage and result",
		Long: `status prints one job: its state (pending, running, complete, error,
canceled), timestamps, attempts, steps, token usage and cost, and its error
or result. --json prints the API's job object.` + clientEnvHelp,
		Example: `  agentbox status job_0193b2c4d5e6f7a8b9c
  agentbox status --json job_0193b2c4d5e6f7a8b9c | jq -r .status`,
		Args: cobra.ExactArgs(1),
		RunE: askJob(a, &f, "status", (*client.Client).Get, func(cmd *cobra.Command, j wire.Job) error {
			return render.Job(cmd.OutOrStdout(), j)
		}),
	}
	f.add(cmd, "print the job as JSON")
	return cmd
}

func newListCmd(a *app) *cobra.Command {
	var f clientFlags
	var opts client.ListOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [flags]",
		Short: "List jobs, newest first",
		Long: `list prints the server's jobs, newest first, one per line: id, status, age,
steps and the task's first line. --status filters (pending, running,
complete, error, canceled); when more jobs exist than --limit, the command to
see the next page is printed on stderr.` + clientEnvHelp,
		Example: `  agentbox list
  agentbox list --status running
  agentbox list --json --limit 100 | jq -r '.jobs[].job_id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.newClient(f)
			if err != nil {
				return err
			}
			page, err := c.List(cmd.Context(), opts)
			if err != nil {
				return fmt.Errorf("list: %w", err)
			}
			if asJSON {
				return render.JSON(cmd.OutOrStdout(), page)
			}
			if err := render.Jobs(cmd.OutOrStdout(), page.Jobs); err != nil {
				return err
			}
			if page.NextCursor != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "more: agentbox list --limit %d --cursor %s\n", opts.Limit, page.NextCursor)
			}
			return nil
		},
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&opts.Status, "status", "", "only jobs in this state")
	fl.IntVar(&opts.Limit, "limit", 20, "jobs per page (at most 1000)")
	fl.StringVar(&opts.Cursor, "cursor", "", "the page after this cursor (printed by a previous list)")
	fl.BoolVar(&asJSON, "json", false, "print the page as JSON")
	return cmd
}
