package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/wire"
)

func newViewCmd(a *app) *cobra.Command {
	var f answerFlags
	var jupyter bool
	cmd := &cobra.Command{
		Use:   "view [flags] JOB_ID",
		Short: "Print a browser link to a running job's desktop (or Jupyter)",
		Long: `view asks the server for a link that opens the job's desktop (noVNC, showing
the sandbox's screen) in a browser, or with --jupyter its Jupyter notebook
server, and prints it. The job must be pending or running: the views exist
while its sandbox does.

The link works once, within one minute: open it right away. Opening it gives
that browser a cookie for this job's desktop and Jupyter pages only (not the
rest of the API), valid for 8 hours or until the server restarts; then run
'agentbox view' again. The API token itself never reaches the browser.

--json prints both links and their expiry.` + clientEnvHelp,
		Example: `  agentbox view job_0193b2c4d5e6f7a8b9c
  xdg-open "$(agentbox view --jupyter job_0193b2c4d5e6f7a8b9c)"
  agentbox view --json job_0193b2c4d5e6f7a8b9c | jq -r .jupyter_url`,
		Args: cobra.ExactArgs(1),
		RunE: askJob(a, &f, "view", (*client.Client).Viewer, func(cmd *cobra.Command, l wire.ViewerLinks) error {
			link, what := l.DesktopURL, "desktop"
			if jupyter {
				link, what = l.JupyterURL, "Jupyter"
			}
			fmt.Fprintln(cmd.OutOrStdout(), link)
			fmt.Fprintf(cmd.ErrOrStderr(), "open it within a minute to see %s's %s; the link works once\n", cmd.Flags().Arg(0), what)
			return nil
		}),
	}
	f.add(cmd, "print both links and their expiry as JSON")
	cmd.Flags().BoolVar(&jupyter, "jupyter", false, "link to the job's Jupyter instead of its desktop")
	return cmd
}
