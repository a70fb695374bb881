package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/store"
)

// ShellAgent runs a job's task text as a bash script in its sandbox. It is
// the stand-in for the model-driven agent, behind the same Agent seam.
type ShellAgent struct{}

var _ Agent = ShellAgent{}

// Run executes the task, streaming its output into the event log.
func (ShellAgent) Run(ctx context.Context, r *Run) (Outcome, error) {
	r.Emit(ctx, event.Command{Command: r.Job.Task})
	req := guest.Shell(r.Job.Task)
	if dl, ok := ctx.Deadline(); ok {
		req.TimeoutMS = max(time.Until(dl).Milliseconds(), 1)
	}
	write, flush := r.Output(ctx, "")
	res, err := r.Sandbox.Guest().ExecStream(ctx, req, write)
	flush()
	if err != nil {
		return Outcome{}, fmt.Errorf("run task: %w", err)
	}
	r.Emit(ctx, event.Exit{ExitCode: res.ExitCode, DurationMS: res.DurationMS,
		TimedOut: res.TimedOut, Truncated: res.Truncated, OOMKilled: res.OOMKilled})
	if res.ExitCode != 0 {
		return Outcome{Status: store.StatusError, Steps: 1, Error: fmt.Sprintf("task script exited %d", res.ExitCode)}, nil
	}
	return Outcome{Status: store.StatusComplete, Steps: 1, Result: "task script exited 0"}, nil
}
