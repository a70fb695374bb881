package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newDiffCmd(a *app) *cobra.Command {
	var f clientFlags
	var format string
	cmd := &cobra.Command{
		Use:   "diff [flags] JOB_ID",
		Short: "Show what an ended job changed, as a unified diff or a patch",
		Long: `diff prints what the job changed in its workspace since it started, as a
unified diff: against the commit it cloned for a repository job (new
untracked files included), else against its starting workspace (empty,
uploaded or another job's). Binary files are named, not shown. The job
must have ended (its sandbox gone).

--format patch prints git format-patch output instead (repository jobs),
which 'git am' applies to a clone of the repository.` + clientEnvHelp,
		Example: `  agentbox diff job_0193b2c4d5e6f7a8b9c | less
  agentbox diff --format patch job_0193b2c4d5e6f7a8b9c > fix.patch && git am fix.patch`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "diff" && format != "patch" {
				return fmt.Errorf("--format %q: want diff or patch", format)
			}
			c, err := a.newClient(f)
			if err != nil {
				return err
			}
			if format == "diff" {
				format = ""
			}
			if _, err := c.Diff(cmd.Context(), args[0], format, cmd.OutOrStdout()); err != nil {
				return fmt.Errorf("diff: %w", err)
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVar(&format, "format", "diff", "diff (a unified diff) or patch (git format-patch output, for repository jobs)")
	return cmd
}
