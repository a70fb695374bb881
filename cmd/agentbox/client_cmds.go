package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/wire"
	"github.com/agentbox/agentbox/internal/wiring"
)

// newClientCmds returns the commands that talk to a running server.
func newClientCmds(a *app) []*cobra.Command {
	cmds := []*cobra.Command{
		newSubmitCmd(a), newStatusCmd(a), newListCmd(a),
		newLogsCmd(a), newCancelCmd(a), newDeleteCmd(a), newDownloadCmd(a), newViewCmd(a),
		newReplyCmd(a),
		newDiffCmd(a), newWorkersCmd(a),
	}
	for _, c := range cmds {
		a.dataDirFlag(c, "the data directory of the local server, whose token file is sent when no token is given")
	}
	return cmds
}

const clientEnvHelp = `

The server is --url, else AGENTBOX_URL, else http://127.0.0.1:8080. The token
is --token, else AGENTBOX_TOKEN, else, when the server is on a loopback
address, the token file of a local server: AGENTBOX_TOKEN_FILE, else the
file 'agentbox serve' wrote to its data directory (--data-dir, else
AGENTBOX_DATA_DIR), so a local server needs no setup. A server started with
another data directory, or by another user (sudo), needs that directory
given, or its token.`

// clientFlags are the connection options of every client command.
type clientFlags struct{ url, token string }

func (f *clientFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.url, "url", "", "server URL (default $"+config.Lookup("AGENTBOX_URL").Fallback()+")")
	cmd.Flags().StringVar(&f.token, "token", "", "API token (default $AGENTBOX_TOKEN, else <data dir>/token)")
}

// newClient connects to the server the flags and the configuration name,
// with the token they give (or a local server's), said by its source.
func (a *app) newClient(f clientFlags) (*client.Client, error) {
	return wiring.Connect(a.cfg, a.flagCfg.DataDir != "", f.url, f.token)
}

// answerFlags are the options of a command that prints one answer of the
// server: the connection's and --json.
type answerFlags struct {
	clientFlags
	json bool
}

func (f *answerFlags) add(cmd *cobra.Command, jsonHelp string) {
	f.clientFlags.add(cmd)
	cmd.Flags().BoolVar(&f.json, "json", false, jsonHelp)
}

// askJob is the RunE of a command that asks the server one thing about
// job args[0] and prints the answer: as JSON with --json, else with show.
func askJob[T any](a *app, f *answerFlags, what string, ask func(*client.Client, context.Context, string) (T, error),
	show func(cmd *cobra.Command, answer T) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := a.newClient(f.clientFlags)
		if err != nil {
			return err
		}
		v, err := ask(c, cmd.Context(), args[0])
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if f.json {
			return render.JSON(cmd.OutOrStdout(), v)
		}
		return show(cmd, v)
	}
}

// submitFlags are the options of `agentbox submit`.
type submitFlags struct {
	clientFlags
	wiring.SubmitFlags
	follow, json bool
}

func newSubmitCmd(a *app) *cobra.Command {
	var f submitFlags
	cmd := &cobra.Command{
		Use:   "submit [flags] TASK",
		Short: "Submit a task to a running agentbox server",
		Long: `submit hands a plain-text task to the server and prints the new job's id.
With --follow it then streams the job's steps like 'agentbox logs' and exits
0 only if the job completes. A TASK of - reads the task from stdin.

--idempotency-key makes a retried submit safe: the server returns the job it
created for that key instead of creating another.

--workspace DIR starts the job from DIR's files: DIR is packed as a tar.gz as
it is uploaded, with a progress line on stderr, and the server unpacks it
into the job's /workspace before the job exists. Symlinks are kept as
symlinks; FIFOs, sockets, devices and symlinks leading out of DIR are refused
before anything is sent (leave them out with --exclude; no .gitignore is
read). --workspace-from JOB starts from a copy of an ended job's workspace
instead.` + networkHelp + `
The server checks the policy against its own settings.` + clientEnvHelp,
		Example: `  agentbox submit "Write a Flask app with a /health route and tests"
  agentbox submit --follow --timeout 20m --memory 4g "Fix the failing tests"
  id=$(agentbox submit --meta ticket=OPS-12 "Summarize README.md")
  agentbox submit - < task.txt
  agentbox submit --workspace . --exclude .venv --exclude node_modules "Fix the failing test"
  agentbox submit --workspace-from job_0193b2c4d5e6f7a8b9c "Now add a test for the empty case"
  agentbox submit --preset python "Build a Flask API with /health that installs flask"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return a.submit(cmd, f, args[0]) },
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.Model, "model", "", "model as provider:name (default: the server's)")
	fl.Var(durationVar(&f.Timeout, 0), "timeout", "wall-clock limit, e.g. 30m or 1h (default: the server's)")
	fl.IntVar(&f.MaxSteps, "max-steps", 0, "most agent steps (default: the server's)")
	fl.Var(sizeVar(&f.Memory), "memory", "sandbox memory, e.g. 512m or 4g (default: the server's)")
	fl.Var(cpusVar(&f.CPUs), "cpus", "sandbox CPUs, e.g. 0.5 or 2 (default: the server's)")
	fl.Var(sizeVar(&f.Disk), "disk", "sandbox disk quota, workspace included, e.g. 2g (default: the server's)")
	fl.StringVar(&f.Isolation, "isolation", "", isolationUsage)
	fl.StringVar(&f.Image, "image", "", "sandbox image, one the server allows (AGENTBOX_IMAGES; default: the server's sandbox image)")
	fl.StringArrayVar(&f.Meta, "meta", nil, "metadata KEY=VALUE kept with the job (repeatable)")
	fl.StringVar(&f.Key, "idempotency-key", "", "makes a retried submit return the same job")
	fl.BoolVarP(&f.follow, "follow", "f", false, "stream the job's steps until it ends")
	fl.BoolVar(&f.json, "json", false, "print JSON (with --follow: then one event per line)")
	fl.StringVar(&f.Repo, "repo", "", "start from a clone of this git repository (https, ssh, a path), cloned by the server with its own credentials")
	fl.StringVar(&f.Ref, "ref", "", "with --repo: the branch, tag or commit to start from (default: the remote's default branch)")
	addHandBackFlags(fl, &f.HandBack)
	fl.StringVar(&f.Workspace, "workspace", "", "start from this directory's files (packed and uploaded)")
	fl.StringArrayVar(&f.Exclude, "exclude", nil, "with --workspace: leave out paths or names matching this pattern, e.g. .venv or '*.log' (repeatable)")
	fl.StringVar(&f.WorkspaceFrom, "workspace-from", "", "start from a copy of this ended job's workspace")
	addNetworkFlags(fl, &f.Network, true)
	return cmd
}

func (a *app) submit(cmd *cobra.Command, f submitFlags, task string) error {
	req, err := f.Request(cmd.InOrStdin(), task)
	if err != nil {
		return usage(err)
	}
	c, err := a.newClient(f.clientFlags)
	if err != nil {
		return err
	}
	sr, err := f.Send(cmd.Context(), c, req, cmd.ErrOrStderr())
	if err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	switch {
	case f.json:
		err = json.NewEncoder(cmd.OutOrStdout()).Encode(sr)
	case f.follow:
		fmt.Fprintf(cmd.ErrOrStderr(), "submitted %s\n", sr.JobID)
	default:
		fmt.Fprintln(cmd.OutOrStdout(), sr.JobID)
	}
	if err != nil || !f.follow {
		return err
	}
	return followJob(cmd, c, sr.JobID, render.FollowOptions{JSON: f.json, Summary: true})
}

func newDeleteCmd(a *app) *cobra.Command {
	var f answerFlags
	cmd := &cobra.Command{
		Use:   "delete [flags] JOB_ID",
		Short: "Delete an ended job's workspace from the server; its record and log stay",
		Long: `delete asks the server to remove an ended job's data (its workspace) at once;
its status and event log stay, and its files and artifacts are gone (410).
The server does this on its own AGENTBOX_RETENTION (default 7 days) after a
job ends. A pending or running job is refused: cancel it first. Deleting a
deleted job again succeeds, saying it already was.` + clientEnvHelp,
		Example: `  agentbox delete job_0193b2c4d5e6f7a8b9c`,
		Args:    cobra.ExactArgs(1),
		RunE: askJob(a, &f, "delete", (*client.Client).DeleteOnce, func(cmd *cobra.Command, d client.Deletion) error {
			if d.Already {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s: already deleted at %s (agentbox delete, or the server's retention period); nothing left to remove\n",
					d.JobID, d.DeletedAt.Local().Format(time.RFC3339))
				return err
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s: data deleted\n", d.JobID)
			return err
		}),
	}
	f.add(cmd, "print the job as JSON")
	return cmd
}

func newCancelCmd(a *app) *cobra.Command {
	var f answerFlags
	cmd := &cobra.Command{
		Use:   "cancel [flags] JOB_ID",
		Short: "Cancel a job: stop its work and remove its sandbox",
		Long: `cancel asks the server to stop a job. A pending job ends canceled at once; a
running one ends canceled once its worker has killed the work and removed the
sandbox (follow it with 'agentbox logs'). Canceling an ended job is an error.` + clientEnvHelp,
		Example: `  agentbox cancel job_0193b2c4d5e6f7a8b9c
  agentbox cancel --json job_0193b2c4d5e6f7a8b9c`,
		Args: cobra.ExactArgs(1),
		RunE: askJob(a, &f, "cancel", (*client.Client).Cancel, func(cmd *cobra.Command, j wire.Job) error {
			if j.Status == "canceled" {
				fmt.Fprintf(cmd.OutOrStdout(), "%s canceled\n", j.JobID)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: cancel requested; the job stops shortly\n", j.JobID)
			}
			return nil
		}),
	}
	f.add(cmd, "print the job as JSON")
	return cmd
}
