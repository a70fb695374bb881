package main

import (
	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/bench"
)

func newBenchCmd(a *app) *cobra.Command {
	var o bench.Options
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure sandbox create, exec and file round trips against plain docker run / docker exec",
		Long: `bench measures, in one run on this machine, agentbox's sandbox operations and
the plain engine doing the same through the docker CLI, and prints a Markdown
table with the ratio of the two:

  - sandbox create until a first exec returns, against 'docker run --rm IMAGE true'
  - the round trip of exec 'true', against 'docker exec CONTAINER true'
  - a 1 MiB file written then read back, against docker exec with cat

It needs the engine, the sandbox image and the docker CLI. Results are
recorded in docs/benchmarks.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := a.newDriver()
			if err != nil {
				return err
			}
			defer d.Close()
			o.Driver, o.Image, o.Log = d, a.cfg.Sandbox.Image, cmd.ErrOrStderr()
			rows, err := bench.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			bench.Markdown(cmd.OutOrStdout(), rows)
			return nil
		},
	}
	cmd.Flags().IntVar(&o.Creates, "creates", 10, "sandboxes to create")
	cmd.Flags().IntVar(&o.Execs, "execs", 200, "exec round trips (the docker exec baseline runs a tenth as many)")
	cmd.Flags().IntVar(&o.Files, "files", 50, "1 MiB write+read cycles")
	cmd.Flags().StringVar(&o.Docker, "docker", "docker", "docker CLI used for the baselines")
	return cmd
}
