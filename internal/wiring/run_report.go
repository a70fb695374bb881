package wiring

import "github.com/agentbox/agentbox/internal/wire"

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
