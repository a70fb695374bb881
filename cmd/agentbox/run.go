package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentbox/agentbox/internal/artifact"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/workspace"
)

// runFlags are the options of `agentbox run`.
type runFlags struct {
	model, memory, cpus, disk string
	maxSteps                  int
	timeout                   time.Duration
}

func newRunCmd(a *app) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run [flags] TASK",
		Short: "Do one task end to end in the foreground, showing each step, without a server",
		Long: `run does one task with the agent, in the foreground, with no server: the job
is recorded in an embedded store under <data dir>/runs/<run>/, worked on in a
fresh sandbox on the local engine, and every model message, tool call and
tool result is printed as it happens. At the end it prints where the
workspace zip is. TASK "-" reads the task from standard input.

The model comes from --model (provider:name), else AGENTBOX_MODEL, else the
key that is set (ANTHROPIC_API_KEY, OPENAI_API_KEY, OPENAI_BASE_URL);
without any, run says what to set. AGENTBOX_AGENT=shell runs the task as a
bash script instead. Ctrl-C cancels the job and removes its sandbox.

Exit status: 0 when the job completed, 1 when it ended in error, 130 when
it was canceled.`,
		Example: `  agentbox run "Create a Python script that prints Hello, World! and run it"
  agentbox run --model openai:llama3.1 --max-steps 30 "Write a CSV filter with tests"
  echo "Build a Flask API with /health and tests" | agentbox run -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			task, err := readTask(args[0], cmd.InOrStdin())
			if err != nil {
				return err
			}
			return exitWith(a.runTask(cmd.Context(), task, f, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "model as provider:name, e.g. anthropic:claude-sonnet-4-5 or openai:gpt-4.1 (default AGENTBOX_MODEL)")
	fl.IntVar(&f.maxSteps, "max-steps", 0, "stop after this many model steps (default AGENTBOX_MAX_STEPS, else 100)")
	fl.DurationVar(&f.timeout, "timeout", 0, "wall-clock limit of the job (default AGENTBOX_JOB_TIMEOUT, else 30m)")
	fl.StringVar(&f.memory, "memory", "", "sandbox memory limit, e.g. 2g")
	fl.StringVar(&f.cpus, "cpus", "", "sandbox CPU limit, e.g. 1.5")
	fl.StringVar(&f.disk, "disk", "", "sandbox disk quota, workspace included, e.g. 2g (default AGENTBOX_SANDBOX_DISK, else 10g)")
	a.driverFlag(cmd)
	return cmd
}

func readTask(arg string, stdin io.Reader) (string, error) {
	if arg != "-" {
		return arg, nil
	}
	b, err := io.ReadAll(io.LimitReader(stdin, jobs.MaxTaskBytes+1))
	if err != nil {
		return "", fmt.Errorf("read task: %w", err)
	}
	return string(b), nil
}

// runTask does one job with a private store and scheduler and follows it.
func (a *app) runTask(ctx context.Context, task string, f runFlags, out, errw io.Writer) (int, error) {
	if a.cfg.Agent.Kind == "model" {
		if _, err := a.modelResolver()(f.model); err != nil {
			return 0, err
		}
	}
	req, err := f.request(task)
	if err != nil {
		return 0, err
	}
	dir := filepath.Join(a.cfg.DataDir, "runs", time.Now().UTC().Format("20060102-150405")+"-"+jobs.NewID()[16:])
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("run dir: %w", err)
	}
	setup := context.WithoutCancel(ctx)
	st, err := sqlite.Open(setup, filepath.Join(dir, "agentbox.db"), sqlite.Options{})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	drv, err := a.newDriver()
	if err != nil {
		return 0, err
	}
	defer drv.Close()
	quiet := slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: slog.LevelError}))
	ws := workspace.NewLocal(dir)
	sched := jobs.NewScheduler(jobs.SchedulerConfig{WorkerID: "run-" + filepath.Base(dir), Concurrency: 1, Workspaces: ws,
		DefaultTimeout: a.cfg.Server.JobTimeout, Grace: -1, Log: quiet}, st, drv, a.newJobAgent(), nil)
	svc := jobs.NewService(st, ws, 1, sched)
	svc.SetCeilings(a.cfg.Sandbox.Ceilings)
	j, _, err := svc.Submit(setup, req)
	if err != nil {
		return 0, err
	}
	schedCtx, stopSched := context.WithCancel(setup)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sched.Run(schedCtx)
	}()
	final, err := followLocal(ctx, svc, j.ID, render.NewSteps(out, errw))
	stopSched()
	<-done
	if err != nil {
		return 0, err
	}
	return a.reportRun(setup, final, dir, ws, errw), nil
}

func (f runFlags) request(task string) (jobs.SubmitRequest, error) {
	req := jobs.SubmitRequest{Task: task, Model: f.model, Limits: store.Limits{MaxSteps: f.maxSteps, Timeout: f.timeout}}
	spec, err := (execFlags{memory: f.memory, cpus: f.cpus, disk: f.disk, timeout: time.Minute}).spec()
	if err != nil {
		return req, err
	}
	req.Limits.MemoryBytes, req.Limits.NanoCPUs, req.Limits.DiskBytes = spec.Limits.MemoryBytes, spec.Limits.NanoCPUs, spec.Limits.DiskBytes
	return req, nil
}

// followLocal prints the job's events as they come until it ends; the first
// interrupt cancels the job, which then ends on its own.
func followLocal(ctx context.Context, svc *jobs.Service, id string, p *render.Steps) (store.Job, error) {
	bg := context.WithoutCancel(ctx)
	var after int64
	canceled := false
	for {
		evs, err := svc.Events(bg, id, after, 1000)
		if err != nil {
			return store.Job{}, err
		}
		for _, ev := range evs {
			_ = p.Show(ev.Type, ev.Payload)
			after = ev.Seq
		}
		j, err := svc.Get(bg, id)
		if err != nil {
			return j, err
		}
		if j.Status.Final() && len(evs) == 0 {
			return j, nil
		}
		if ctx.Err() != nil && !canceled {
			canceled = true
			_ = p.Note("agentbox: interrupted: canceling the job and removing its sandbox")
			_, _ = svc.Cancel(bg, id)
		}
		wctx := bg
		if !canceled {
			wctx = ctx
		}
		_ = svc.WaitEvents(wctx, id, after, time.Second)
	}
}

// reportRun zips the workspace into dir, prints the outcome, and returns
// the exit code.
func (a *app) reportRun(ctx context.Context, j store.Job, dir string, ws *workspace.Local, w io.Writer) int {
	zip := filepath.Join(dir, "artifacts.zip")
	rep, err := artifact.CreateFile(zip, func(f io.Writer) (artifact.Report, error) {
		return ws.Zip(ctx, j.ID, f, artifact.Options{})
	})
	if err != nil {
		fmt.Fprintf(w, "agentbox: no artifacts: %v\n", err)
		zip = ""
	} else if n := rep.Len(); n > 0 {
		fmt.Fprintf(w, "agentbox: %d workspace entries left out of the zip or stored differently; %s in it says why\n", n, artifact.ManifestName)
	}
	fmt.Fprintf(w, "\njob %s %s after %d steps", j.ID, j.Status, j.Steps)
	if u := j.Usage; u.InputTokens+u.CacheReadTokens+u.OutputTokens > 0 {
		fmt.Fprintf(w, ", %d tokens in (%d from cache), %d out, $%.4f", u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens,
			u.CacheReadTokens, u.OutputTokens, u.CostUSD)
	}
	fmt.Fprintln(w)
	if j.Result != "" {
		fmt.Fprintf(w, "result: %s\n", j.Result)
	}
	if j.Error != "" {
		fmt.Fprintf(w, "error: %s\n", j.Error)
	}
	if zip != "" {
		fmt.Fprintf(w, "workspace: %s\nartifacts: %s\n", ws.Dir(j.ID), zip)
	}
	switch j.Status {
	case store.StatusComplete:
		return 0
	case store.StatusCanceled:
		return 130
	}
	return 1
}
