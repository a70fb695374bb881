package render

import (
	"fmt"
	"io"

	"github.com/agentbox/agentbox/internal/wire"
)

// Summary prints how an ended job ended, after its steps: a blank line,
// "job ID STATUS after N steps" with its token usage and cost, its result
// or error, and what the host did with its repository. `agentbox run`
// and `submit --follow` end with it.
func Summary(w io.Writer, j wire.Job) error {
	fmt.Fprintf(w, "\njob %s %s after %d %s", printable(j.JobID), printable(j.Status), j.Steps, plural(j.Steps, "step", "steps"))
	if u := j.Usage; u.InputTokens+u.CacheReadTokens+u.OutputTokens > 0 {
		fmt.Fprintf(w, ", %d tokens in (%d from cache), %d out, $%.4f", u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens,
			u.CacheReadTokens, u.OutputTokens, u.CostUSD)
	}
	if !j.CreatedAt.IsZero() && j.EndedAt.After(j.CreatedAt) {
		fmt.Fprint(w, " · "+Elapsed(j.EndedAt.Sub(j.CreatedAt)))
	}
	fmt.Fprintln(w)
	if j.Result != "" {
		fmt.Fprintf(w, "result: %s\n", printable(j.Result))
	}
	if j.Error != "" {
		fmt.Fprintf(w, "error: %s\n", printable(j.Error))
	}
	if j.Repo != nil && j.Git != nil {
		return GitOutcome(w, j.Repo.Push, *j.Git)
	}
	return nil
}
