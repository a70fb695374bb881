package render

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	dockerunits "github.com/docker/go-units"

	"github.com/agentbox/agentbox/internal/units"
	"github.com/agentbox/agentbox/internal/wire"
)

// Job prints one job as aligned "key: value" rows, leaving out empty ones.
// Values have no control characters: a result is the model's words, a git
// error a remote's answer.
func Job(w io.Writer, j wire.Job) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, printable(v))
		}
	}
	row("job", j.JobID)
	row("status", statusText(j))
	if j.QueuePosition > 0 {
		row("queue position", fmt.Sprint(j.QueuePosition))
	}
	row("worker", j.Worker)
	row("task", firstLine(j.Task, 100))
	model, limits := j.Model, ""
	if e := j.Effective; e != nil {
		model, limits = e.Model, LimitsText(e.Limits)
		if j.Model == "" && model != "" {
			model += " (the server's default)"
		}
	}
	row("model", model)
	row("limits", limits)
	row("image", j.Image)
	row("isolation", j.Isolation)
	row("network", PolicyLine(j.Network))
	row("created", stamp(j.CreatedAt))
	row("started", stamp(j.StartedAt))
	row("ended", stamp(j.EndedAt))
	if !j.DeletedAt.IsZero() {
		row("deleted", stamp(j.DeletedAt)+": its workspace, files, zip and diff are gone; its record and log remain")
	}
	row("attempts", fmt.Sprintf("%d of %d", j.Attempts, j.MaxAttempts))
	row("steps", fmt.Sprint(j.Steps))
	if j.Turn > 1 {
		row("turn", fmt.Sprint(j.Turn))
	}
	u := j.Usage
	row("tokens", fmt.Sprintf("%d in, %d out, %d context", u.InputTokens, u.OutputTokens, j.ContextTokens))
	row("cost", fmt.Sprintf("$%.4f", u.CostUSD))
	row("error", j.Error)
	row("result", j.Result)
	if r := j.Repo; r != nil {
		row("repo", strings.TrimSpace(r.URL+" "+r.Ref))
		if g := j.Git; g != nil {
			for _, kv := range gitRows(r.Push || r.PullRequest != nil, *g) {
				row(kv[0], kv[1])
			}
		}
	}
	if (j.Status == "complete" || j.Status == "error" || j.Status == "canceled") && j.DeletedAt.IsZero() {
		row("download", "agentbox download "+j.JobID)
		row("diff", "agentbox diff "+j.JobID)
	}
	return tw.Flush()
}

// statusText is a job's status as the CLI shows it: "complete, deleted"
// once its data was deleted.
func statusText(j wire.Job) string {
	if !j.DeletedAt.IsZero() {
		return j.Status + ", deleted"
	}
	return j.Status
}

// LimitsText writes limits as one line: "30m timeout · 100 steps ·
// 2GiB memory · 1 CPU · 10GiB disk", leaving out those not set.
func LimitsText(l wire.Limits) string {
	var parts []string
	add := func(ok bool, s string) {
		if ok {
			parts = append(parts, s)
		}
	}
	add(l.Timeout > 0, units.FormatDuration(time.Duration(l.Timeout))+" timeout")
	add(l.MaxSteps > 0, fmt.Sprint(l.MaxSteps, " steps"))
	add(l.Memory > 0, units.FormatSize(int64(l.Memory))+" memory")
	add(l.CPUs == 1, "1 CPU")
	add(l.CPUs > 0 && l.CPUs != 1, strconv.FormatFloat(l.CPUs, 'f', -1, 64)+" CPUs")
	add(l.Disk > 0, units.FormatSize(int64(l.Disk))+" disk")
	add(l.Egress > 0, units.FormatSize(int64(l.Egress))+" egress")
	add(l.ContextWindow > 0, fmt.Sprint(l.ContextWindow, " tokens of context"))
	return strings.Join(parts, " · ")
}

// gitRows are what the host did with a repository job's result, as
// (key, value) rows: the branch and whether it is pushed, the base, the
// commit, the pull request and why a step failed. push says whether the
// job asked for the push.
func gitRows(push bool, g wire.Git) [][2]string {
	branch := g.Branch
	switch {
	case branch == "":
	case g.Pushed:
		branch += " (pushed)"
	case push:
		branch += " (not pushed)"
	}
	return [][2]string{{"branch", branch}, {"base", g.BaseCommit}, {"commit", g.Commit},
		{"pull request", g.PullRequestURL}, {"git error", g.Error}}
}

// GitOutcome prints what the host did with a repository job's result
// (gitRows) as "key: value" lines, leaving out empty ones: the end of
// `agentbox run`.
func GitOutcome(w io.Writer, push bool, g wire.Git) error {
	for _, kv := range gitRows(push, g) {
		if kv[1] != "" && kv[0] != "base" {
			if _, err := fmt.Fprintf(w, "%s: %s\n", kv[0], printable(kv[1])); err != nil {
				return err
			}
		}
	}
	return nil
}

// Jobs prints a table of jobs, one a line, under a header.
func Jobs(w io.Writer, jobs []wire.Job) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATUS\tCREATED\tSTEPS\tTASK")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", printable(j.JobID), printable(statusText(j)), ago(j.CreatedAt), j.Steps, printable(firstLine(j.Task, 60)))
	}
	return tw.Flush()
}

// Workers prints the registered workers as a table.
func Workers(w io.Writer, ws []wire.Worker) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tADDRESS\tALIVE\tRUNNING\tCAPACITY\tHEARTBEAT\tSTARTED")
	for _, x := range ws {
		alive := "no"
		if x.Alive {
			alive = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", x.WorkerID, x.Address, alive, x.Running, x.Capacity, ago(x.HeartbeatAt), ago(x.StartedAt))
	}
	return tw.Flush()
}

// Outcome prints why a followed job did not complete: how it ended, or
// that it has not ended yet. It prints nothing for a complete job.
func Outcome(w io.Writer, id string, j wire.Job) error {
	var err error
	switch j.Status {
	case "complete":
	case "error", "canceled":
		_, err = fmt.Fprintf(w, "job %s ended %s%s\n", id, j.Status, printable(prefixed(": ", j.Error)))
	default:
		_, err = fmt.Fprintf(w, "job %s is %s, not ended yet\n", id, printable(j.Status))
	}
	return err
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format(time.RFC3339) + " (" + ago(t) + ")"
}

func ago(t time.Time) string {
	d := dockerunits.HumanDuration(time.Since(t))
	return strings.ToLower(d[:1]) + d[1:] + " ago"
}

// JSON prints v as indented JSON, for --json.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
