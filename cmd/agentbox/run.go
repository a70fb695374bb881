package main

import (
	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/wiring"
)

func newRunCmd(a *app) *cobra.Command {
	var f wiring.RunRequest
	var hb wiring.HandBackFlags
	var nf wiring.NetworkFlags
	cmd := &cobra.Command{
		Use:   "run [flags] TASK",
		Short: "Do one task end to end in the foreground, showing each step, without a server",
		Long: `run does one task with the agent, in the foreground, with no server: the job
is recorded in an embedded store under <data dir>/runs/<run>/, worked on in a
fresh sandbox on the local engine, and every model message, tool call and
tool result is printed as it happens. At the end it prints where the
workspace zip is. TASK "-" reads the task from standard input.

--workspace DIR starts the job from DIR's files: a copy of DIR is made in the
run's directory, and DIR itself is never modified (FIFOs, sockets and
devices are not copied; symlinks are copied as they are). With --in-place
the job works in DIR itself: the sandbox mounts it, its files belong to the
sandbox's uid while the job runs and to DIR's owner again after it (this
needs root, as the server does); nothing the agent leaves is followed by
agentbox, and run names the symlinks it left that lead out of DIR. DIR may
not hold agentbox's data dir. At the end run says where the result is.

The model comes from --model (provider:name), else AGENTBOX_MODEL, else the
key that is set (ANTHROPIC_API_KEY, OPENAI_API_KEY, OPENAI_BASE_URL);
without any, run says what to set. AGENTBOX_AGENT=shell runs the task as a
bash script instead. Ctrl-C cancels the job and removes its sandbox.

Exit status: 0 when the job completed, 1 when it ended in error, 130 when
it was canceled; 2 when it cannot run here as asked (an isolation tier
missing, a network policy the operator does not allow).` + networkHelp,
		Example: `  agentbox run "Create a Python script that prints Hello, World! and run it"
  agentbox run --model openai:llama3.1 --max-steps 30 "Write a CSV filter with tests"
  echo "Build a Flask API with /health and tests" | agentbox run -
  agentbox run --workspace . "Make the failing test pass"
  sudo agentbox run --workspace ~/proj --in-place "Add type hints to utils.py"
  agentbox run --preset python --allow news.ycombinator.com "Scrape the titles of the top 10 Hacker News articles"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.Task, f.Stdin = args[0], cmd.InOrStdin()
			if err := hb.Check(f.Repo); err != nil {
				return usage(err)
			}
			hb.ToRun(&f)
			var err error
			if f.Network, err = nf.Check(a.cfg); err != nil {
				return err
			}
			return exitWith(wiring.RunJobLive(cmd.Context(), a.cfg, f, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Model, "model", "", "model as provider:name, e.g. anthropic:claude-sonnet-4-5 or openai:gpt-4.1 (default AGENTBOX_MODEL)")
	fl.IntVar(&f.MaxSteps, "max-steps", 0, "stop after this many model steps (default "+config.Lookup("AGENTBOX_MAX_STEPS").Fallback()+")")
	fl.Var(durationVar(&f.Timeout, 0), "timeout", "wall-clock limit of the job (default "+config.Lookup("AGENTBOX_JOB_TIMEOUT").Fallback()+")")
	addSandboxFlags(fl, &f.SandboxRequest)
	fl.StringVar(&f.Repo, "repo", "", "start from a clone of this git repository (https, ssh, a path), cloned with the host's credentials (AGENTBOX_GIT_*)")
	fl.StringVar(&f.Ref, "ref", "", "with --repo: the branch, tag or commit to start from (default: the remote's default branch)")
	addHandBackFlags(fl, &hb)
	addProjectFlags(fl, &f.Workspace, &f.InPlace)
	addNetworkFlags(fl, &nf, true)
	a.driverFlag(cmd)
	a.dataDirFlag(cmd, "where runs are kept, under runs/")
	return cmd
}
