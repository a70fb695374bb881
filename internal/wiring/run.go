package wiring

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox/agentbox/internal/artifact"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/workspace"
)

// RunIO is how RunJob shows a job as it goes.
type RunIO struct {
	// Event is given each of the job's events, in order.
	Event func(store.Event)
	// Interrupted is called once, when ctx ends before the job: the job is
	// being canceled and its sandbox removed.
	Interrupted func()
	// Log receives the scheduler's errors.
	Log io.Writer
}

// RunReport is how a job done by RunJob ended and what it left.
type RunReport struct {
	Job store.Job
	// Elapsed is how long the run took, as its caller timed it (0: not told).
	Elapsed time.Duration
	// Workspace is the job's workspace directory.
	Workspace string
	// Zip is the workspace's artifacts.zip, "" if ZipErr says why there is none.
	Zip    string
	ZipErr error
	// Unzipped counts the workspace entries left out of the zip or stored
	// differently; the zip's manifest says why.
	Unzipped int
	// From is the directory the job started from (RunRequest.Workspace),
	// resolved; InPlace says the job worked in it itself (Workspace is
	// From then, and there is no zip).
	From    string
	InPlace bool
	// NotCopied names what the copy of From left out, and why.
	NotCopied []string
	// LinksOut says what symlinks leading out of an in-place workspace
	// the job left, or "".
	LinksOut string
	// Log is the run's log file (RunLogName in its run directory): what
	// the driver and the job side logged, kept off the display. Warnings
	// counts its records at warning level or above.
	Log      string
	Warnings int64
}

// RunLogName is the run's log file in its run directory.
const RunLogName = "run.log"

// RunRequest is the job `agentbox run` is asked to do.
type RunRequest struct {
	// Task is the task, or "-" to read it from Stdin.
	Task  string
	Stdin io.Reader
	// Model is a provider:name spec; "" is the configured default.
	Model    string
	MaxSteps int
	Timeout  time.Duration
	// SandboxRequest is the job's sandbox: limits, image, tier.
	SandboxRequest
	// Network is the job's egress policy (NetworkFlags.Policy); zero for
	// the operator's default.
	Network egress.Policy
	// Repo and Ref start the job from a clone of a git repository.
	Repo, Ref string
	// Branch, Push and PullRequest are the repository's hand-back (store.Repo).
	Branch      string
	Push        bool
	PullRequest *store.PullRequest
	// Workspace is a directory the job starts from: a copy of it, or,
	// with InPlace, the directory itself.
	Workspace string
	InPlace   bool
}

// submitRequest reads the task and checks that the model opens before it
// parses the limits, so that a missing model is said first.
func (r RunRequest) submitRequest(cfg config.Config) (jobs.SubmitRequest, error) {
	task, err := readTask(r.Task, r.Stdin)
	if err != nil {
		return jobs.SubmitRequest{}, err
	}
	if cfg.Agent.Kind == "model" {
		if _, err := ModelResolver(cfg.Model)(r.Model); err != nil {
			return jobs.SubmitRequest{}, err
		}
	}
	req := jobs.SubmitRequest{Task: task, Model: r.Model, Limits: store.Limits{MaxSteps: r.MaxSteps, Timeout: r.Timeout}}
	req.Image, req.Isolation, req.Network = r.Image, r.Isolation, r.Network
	if r.Repo != "" || r.Ref != "" {
		if r.Repo == "" {
			return jobs.SubmitRequest{}, errors.New("--ref needs --repo")
		}
		req.Repo = &store.Repo{URL: r.Repo, Ref: r.Ref, Branch: r.Branch, Push: r.Push, PullRequest: r.PullRequest}
	}
	l, err := r.limits()
	req.Limits.MemoryBytes, req.Limits.NanoCPUs, req.Limits.DiskBytes = l.MemoryBytes, l.NanoCPUs, l.DiskBytes
	return req, err
}

// readTask is arg, or with "-" what stdin holds, up to one byte over the
// longest task (which the service then refuses).
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

// RunJob does one job with a private store and scheduler in a new run
// directory under <data dir>/runs, gives its events to w as they come
// until it ends, and zips its workspace. What the driver and the job
// side log goes to the run's log file (RunReport.Log), never among the
// job's events on the display. The first interrupt (ctx ending) cancels
// the job, which then ends on its own.
func RunJob(ctx context.Context, cfg config.Config, r RunRequest, w RunIO) (rep RunReport, err error) {
	req, err := r.submitRequest(cfg)
	if err != nil {
		return RunReport{}, err
	}
	from, err := r.runDir(cfg.DataDir)
	if err != nil {
		return RunReport{}, err
	}
	dir := filepath.Join(cfg.DataDir, "runs", time.Now().UTC().Format("20060102-150405")+"-"+jobs.NewID()[16:])
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return RunReport{}, fmt.Errorf("run dir: %w", err)
	}
	log, closeLog, err := openRunLog(filepath.Join(dir, RunLogName))
	if err != nil {
		return RunReport{}, err
	}
	defer func() { rep.Log, rep.Warnings = closeLog() }()
	setup := context.WithoutCancel(ctx)
	j, err := openJobs(setup, cfg, log, runJobsConfig(cfg, dir, w.Log, r.InPlace, from))
	if err != nil {
		return RunReport{}, err
	}
	defer j.Close()
	var notCopied []string
	if from != "" && !r.InPlace {
		if req.Staged, notCopied, err = stageCopy(setup, j.service, from); err != nil {
			return RunReport{}, err
		}
	}
	job, _, err := j.service.Submit(setup, req)
	if err != nil {
		return RunReport{}, err
	}
	final, err := runAndFollow(ctx, j, job.ID, w)
	if err != nil {
		return RunReport{}, err
	}
	if r.InPlace {
		return RunReport{Job: final, Workspace: from, From: from, InPlace: true, LinksOut: workspace.DescribeLinksOut(from)}, nil
	}
	rep = report(setup, j, final, dir)
	rep.From, rep.NotCopied = from, notCopied
	return rep, nil
}

// runJobsConfig is the job side of a run in dir: one worker, one attempt,
// its errors to logw; in place, on the directory from.
func runJobsConfig(cfg config.Config, dir string, logw io.Writer, inPlace bool, from string) jobsConfig {
	quiet := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelError}))
	jc := jobsConfig{dir: dir, workers: true, maxAttempts: 1, ceilings: &cfg.Sandbox.Ceilings,
		sched: jobs.SchedulerConfig{WorkerID: "run-" + filepath.Base(dir), Concurrency: 1,
			DefaultTimeout: cfg.Server.JobTimeout, MaxOutputEvents: cfg.Server.LiveOutputMax, Grace: -1, Log: quiet}}
	if inPlace {
		jc.inPlace = from
	}
	return jc
}

// runAndFollow runs j's scheduler while it follows job id to its end.
func runAndFollow(ctx context.Context, j *jobSide, id string, w RunIO) (store.Job, error) {
	schedCtx, stopSched := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		j.run(schedCtx)
	}()
	final, err := follow(ctx, j.service, id, w)
	stopSched()
	<-done
	return final, err
}

// follow gives the job's events to w as they come until it ends; the first
// interrupt cancels the job, which then ends on its own.
func follow(ctx context.Context, svc *jobs.Service, id string, w RunIO) (store.Job, error) {
	bg := context.WithoutCancel(ctx)
	var after int64
	canceled := false
	for {
		evs, err := svc.Events(bg, id, after, 1000)
		if err != nil {
			return store.Job{}, err
		}
		for _, ev := range evs {
			w.Event(ev)
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
			w.Interrupted()
			_, _ = svc.Cancel(bg, id)
		}
		wctx := bg
		if !canceled {
			wctx = ctx
		}
		_ = svc.WaitEvents(wctx, id, after, time.Second)
	}
}

// report zips the ended job's workspace, with its diff, into dir.
func report(ctx context.Context, j *jobSide, job store.Job, dir string) RunReport {
	r := RunReport{Job: job, Workspace: j.workspaces.Dir(job.ID), Zip: filepath.Join(dir, "artifacts.zip")}
	rep, err := artifact.CreateFile(r.Zip, func(f io.Writer) (artifact.Report, error) {
		return j.service.Artifacts(ctx, job.ID, f, artifact.Options{})
	})
	if err != nil {
		r.Zip, r.ZipErr = "", err
		return r
	}
	r.Unzipped = rep.Len()
	return r
}
