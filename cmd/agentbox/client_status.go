package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/wire"
)

func newStatusCmd(a *app) *cobra.Command {
	var f clientFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [flags] JOB_ID",
		Short: "Show a job's status, progress, usage and result",
		Long: `status prints one job: its state (pending, running, complete, error,
canceled), timestamps, attempts, steps, token usage and cost, and its error
or result. --json prints the API's job object.` + clientEnvHelp,
		Example: `  agentbox status job_0193b2c4d5e6f7a8b9c
  agentbox status --json job_0193b2c4d5e6f7a8b9c | jq -r .status`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.newClient(f)
			if err != nil {
				return err
			}
			j, err := c.Get(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("status: %w", err)
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), j)
			}
			printJob(cmd.OutOrStdout(), j)
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the job as JSON")
	return cmd
}

func printJob(w io.Writer, j wire.Job) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("job", j.JobID)
	row("status", j.Status)
	row("task", firstLine(j.Task, 100))
	row("model", j.Model)
	row("created", stamp(j.CreatedAt))
	row("started", stamp(j.StartedAt))
	row("ended", stamp(j.EndedAt))
	row("attempts", fmt.Sprintf("%d of %d", j.Attempts, j.MaxAttempts))
	row("steps", fmt.Sprint(j.Steps))
	u := j.Usage
	row("tokens", fmt.Sprintf("%d in, %d out, %d context", u.InputTokens, u.OutputTokens, j.ContextTokens))
	row("cost", fmt.Sprintf("$%.4f", u.CostUSD))
	row("error", j.Error)
	row("result", j.Result)
	if j.Status == "complete" || j.Status == "error" || j.Status == "canceled" {
		row("download", "agentbox download "+j.JobID)
	}
	tw.Flush()
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format(time.RFC3339) + " (" + ago(t) + ")"
}

func ago(t time.Time) string {
	d := units.HumanDuration(time.Since(t))
	return strings.ToLower(d[:1]) + d[1:] + " ago"
}

// firstLine returns s's first line, cut to n runes.
func firstLine(s string, n int) string {
	s, _, cut := strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > n {
		s, cut = string(r[:n]), true
	}
	if cut {
		s += "…"
	}
	return s
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
				return printJSON(cmd.OutOrStdout(), page)
			}
			printJobs(cmd.OutOrStdout(), page.Jobs)
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

func printJobs(w io.Writer, jobs []wire.Job) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATUS\tCREATED\tSTEPS\tTASK")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", j.JobID, j.Status, ago(j.CreatedAt), j.Steps, firstLine(j.Task, 60))
	}
	tw.Flush()
}
