package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/wire"
)

func newWorkersCmd(a *app) *cobra.Command {
	var f clientFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "workers [flags]",
		Short: "List the workers that run the server's jobs",
		Long: `workers prints the workers registered in the server's job store, one per
line: id, internal address, whether it is alive (a heartbeat within the last
few intervals), jobs running, capacity, last heartbeat and start. Every
'agentbox serve' that runs jobs (role all or worker) registers itself; see
docs/cluster.md.` + clientEnvHelp,
		Example: `  agentbox workers
  agentbox workers --json | jq '[.workers[] | select(.alive)] | length'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.newClient(f)
			if err != nil {
				return err
			}
			ws, err := c.Workers(cmd.Context())
			if err != nil {
				return fmt.Errorf("workers: %w", err)
			}
			if asJSON {
				return render.JSON(cmd.OutOrStdout(), wire.WorkerList{Workers: ws})
			}
			return render.Workers(cmd.OutOrStdout(), ws)
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the workers as JSON")
	return cmd
}
