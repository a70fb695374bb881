package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/wiring"
)

// rawUsage is the help of the --raw flag of the commands that print what
// a sandbox wrote.
const rawUsage = "print the sandbox's bytes as they are, escape sequences included, on a terminal too"

func newDiffCmd(a *app) *cobra.Command {
	var f clientFlags
	var format string
	var raw, all bool
	cmd := &cobra.Command{
		Use:   "diff [flags] JOB_ID",
		Short: "Show what an ended job changed, as a unified diff or a patch",
		Long: `diff prints what the job changed in its workspace since it started, as a
unified diff: against the commit it cloned for a repository job (new
untracked files included), else against its starting workspace (empty,
uploaded or another job's). Binary files are named, not shown. What the
workspace's .gitignore files ignore and caches (__pycache__, .pytest_cache,
.mypy_cache, .ruff_cache, node_modules, .venv, .tox) are left out; --all
keeps them. The job must have ended (its sandbox gone).

--format patch prints git format-patch output instead (repository jobs),
which 'git am' applies to a clone of the repository.

The files are the sandbox's: on a terminal, their control characters and
escape sequences but colours are shown (as ^[, ^G, <U+009B>), not acted on,
so a file cannot set the clipboard, the title or clear the screen. A pipe
or a file gets the bytes unchanged; --raw sends them to a terminal too.` + clientEnvHelp,
		Example: `  agentbox diff job_0193b2c4d5e6f7a8b9c | less
  agentbox diff --format patch job_0193b2c4d5e6f7a8b9c > fix.patch && git am fix.patch`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "diff" && format != "patch" {
				return usage(fmt.Errorf("--format %q: want diff or patch", format))
			}
			c, err := a.newClient(f)
			if err != nil {
				return err
			}
			return wiring.Diff(cmd.Context(), c, args[0], format, all, render.ForTerminal(cmd.OutOrStdout(), raw))
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&raw, "raw", false, rawUsage)
	cmd.Flags().BoolVar(&all, "all", false, "keep what .gitignore ignores and caches (__pycache__, node_modules, ...)")
	cmd.Flags().StringVar(&format, "format", "diff", "diff (a unified diff) or patch (git format-patch output, for repository jobs)")
	return cmd
}
