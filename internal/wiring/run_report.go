package wiring

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/agentbox/agentbox/internal/artifact"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/render"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

// Summary is the job of r as the API would give it to submit --follow,
// for the summary a run ends with (render.Summary).
func (r RunReport) Summary() wire.Job {
	j := r.Job
	w := wire.Job{JobID: j.ID, Status: string(j.Status), Steps: j.Steps, Usage: wire.Usage(j.Usage), Result: j.Result, Error: j.Error,
		CreatedAt: j.CreatedAt, EndedAt: j.EndedAt}
	if j.Repo != nil {
		g := wire.Git(j.Git)
		w.Repo, w.Git = &wire.Repo{URL: j.Repo.URL, Ref: j.Repo.Ref, Push: j.Repo.Push}, &g
	}
	return w
}

// WriteEnd writes how the job ended and where it left its workspace, as
// `agentbox run` ends, and returns run's exit code: 0 when the job
// completed, 130 when it was canceled, else 1.
func (r RunReport) WriteEnd(w io.Writer) int {
	j := r.Job
	if r.ZipErr != nil {
		fmt.Fprintf(w, "agentbox: no artifacts: %v\n", r.ZipErr)
	} else if r.Unzipped > 0 {
		fmt.Fprintf(w, "agentbox: %d workspace entries left out of the zip or stored differently; %s in it says why\n", r.Unzipped, artifact.ManifestName)
	}
	_ = render.Summary(w, r.Summary())
	r.WriteWhere(w)
	switch j.Status {
	case store.StatusComplete:
		return 0
	case store.StatusCanceled:
		return 130
	}
	return 1
}

// WriteWhere writes where the job left its result: its workspace, the
// artifacts, what was not copied, the log and its warnings.
func (r RunReport) WriteWhere(w io.Writer) {
	if len(r.NotCopied) > 0 {
		fmt.Fprintf(w, "not copied from %s: %s\n", r.From, render.Printable(strings.Join(r.NotCopied, "; ")))
	}
	switch {
	case r.InPlace:
		fmt.Fprintf(w, "workspace: %s (changed in place)\n", r.Workspace)
		if r.LinksOut != "" {
			fmt.Fprintf(w, "note: %s\n", render.Printable(r.LinksOut))
		}
	case r.Zip != "" && r.From != "":
		fmt.Fprintf(w, "workspace: %s (a copy of %s, which is unchanged)\nartifacts: %s\n", r.Workspace, r.From, r.Zip)
	case r.Zip != "":
		fmt.Fprintf(w, "workspace: %s\nartifacts: %s\n", r.Workspace, r.Zip)
	case r.From != "":
		fmt.Fprintf(w, "workspace: %s (a copy of %s, which is unchanged)\n", r.Workspace, r.From)
	case r.Workspace != "":
		fmt.Fprintf(w, "workspace: %s\n", r.Workspace)
	}
	switch {
	case r.Warnings == 1:
		fmt.Fprintf(w, "log: %s (a warning)\n", r.Log)
	case r.Warnings > 1:
		fmt.Fprintf(w, "log: %s (%d warnings)\n", r.Log, r.Warnings)
	}
}

// RunJobLive is `agentbox run`: RunJob in the foreground, its steps shown
// on out as they happen and a live status line on errw, then how it
// ended (WriteEnd). It returns the exit status.
func RunJobLive(ctx context.Context, cfg config.Config, r RunRequest, out, errw io.Writer) (int, error) {
	live := render.NewLive(errw, "Ctrl-C cancels the job")
	shown := live.Writer(errw)
	p := render.NewSteps(live.Writer(out), shown)
	live.Start("starting")
	rep, err := RunJob(ctx, cfg, r, RunIO{Log: shown,
		Event: func(ev store.Event) { live.Follow(ev.Type, ev.Payload); _ = p.Show(ev.Type, ev.Payload) },
		Interrupted: func() {
			fmt.Fprintln(shown, "agentbox: interrupted: canceling the job and removing its sandbox")
		}})
	rep.Elapsed = live.Stop()
	if err != nil {
		return 0, err
	}
	return rep.WriteEnd(errw), nil
}
