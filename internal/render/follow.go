package render

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/agentbox/agentbox/internal/wire"
)

// JobEvents is where a job's events and state come from: the API client.
type JobEvents interface {
	// Follow gives fn each event after seq after until the job ends;
	// ReadEvents those that exist now.
	Follow(ctx context.Context, id string, after int64, fn func(wire.Event) error) error
	ReadEvents(ctx context.Context, id string, after int64, fn func(wire.Event) error) error
	Get(ctx context.Context, id string) (wire.Job, error)
}

// FollowOptions say how Follow shows a job (agentbox logs, submit and
// reply --follow).
type FollowOptions struct {
	// NoFollow shows the events so far and stops; JSON shows each event
	// as one JSON line.
	NoFollow, JSON bool
	// After is the event seq to start after.
	After int64
	// Summary ends the steps with how the job ended, as run does
	// (submit --follow, reply --follow).
	Summary bool
}

// Follow shows job id's events as steps (its output on out, the rest
// on errw, a spinner on a terminal) and then how it ended, and returns
// the exit status: 0 if the job completed, 1 if it did not, 130 when ctx
// was interrupted.
func Follow(ctx context.Context, src JobEvents, id string, o FollowOptions, out, errw io.Writer) (int, error) {
	live := NewLive(errw, "Ctrl-C stops following; the job goes on")
	steps := NewSteps(live.Writer(out), live.Writer(errw))
	show := func(ev wire.Event) error { live.Follow(ev.Type, ev.Payload); return steps.Show(ev.Type, ev.Payload) }
	if !o.JSON && !o.NoFollow {
		live.Start("waiting")
	}
	if o.JSON {
		enc := json.NewEncoder(out)
		show = func(ev wire.Event) error { return enc.Encode(ev) }
	}
	read := src.Follow
	if o.NoFollow {
		read = src.ReadEvents
	}
	err := read(ctx, id, o.After, show)
	live.Stop()
	if ctx.Err() != nil {
		return 130, nil
	}
	if err != nil {
		return 0, fmt.Errorf("logs: %w", err)
	}
	j, err := src.Get(ctx, id)
	if err != nil {
		return 0, fmt.Errorf("logs: %w", err)
	}
	switch {
	case o.JSON:
	case o.Summary && ended(j.Status):
		_ = Summary(errw, j)
		if j.DeletedAt.IsZero() {
			fmt.Fprintf(errw, "download: agentbox download %s\ndiff: agentbox diff %s\n", id, id)
		}
	default:
		_ = Outcome(errw, id, j)
	}
	if j.Status == "complete" {
		return 0, nil
	}
	return 1, nil
}

// ended reports whether a job in status s has ended.
func ended(s string) bool { return s == "complete" || s == "error" || s == "canceled" }
