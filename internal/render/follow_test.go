package render

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/wire"
)

// fakeEvents is a job's stored events and its final state.
type fakeEvents struct {
	events []wire.Event
	job    wire.Job
	// followed says which of Follow and ReadEvents was called, after what.
	followed string
	after    int64
}

func (f *fakeEvents) read(kind string, after int64, fn func(wire.Event) error) error {
	f.followed, f.after = kind, after
	for _, ev := range f.events {
		if err := fn(ev); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeEvents) Follow(_ context.Context, _ string, after int64, fn func(wire.Event) error) error {
	return f.read("follow", after, fn)
}

func (f *fakeEvents) ReadEvents(_ context.Context, _ string, after int64, fn func(wire.Event) error) error {
	return f.read("read", after, fn)
}

func (f *fakeEvents) Get(context.Context, string) (wire.Job, error) { return f.job, nil }

// TestFollow: the events are shown as steps or JSON lines, and the exit
// status is the job's outcome.
func TestFollow(t *testing.T) {
	state := wire.Event{Seq: 1, Type: "state", Payload: json.RawMessage(`{"status":"error","error":"boom"}`)}
	for _, tc := range []struct {
		name     string
		o        FollowOptions
		status   string
		code     int
		followed string
		out, err string
	}{
		{"steps", FollowOptions{}, "complete", 0, "follow", "", "[error] boom\n"},
		{"no-follow", FollowOptions{NoFollow: true, After: 7}, "error", 1, "read", "", "[error] boom\n"},
		{"json", FollowOptions{JSON: true}, "canceled", 1, "follow", `"type":"state"`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &fakeEvents{events: []wire.Event{state}, job: wire.Job{JobID: "job_1", Status: tc.status}}
			var out, errw strings.Builder
			code, err := Follow(context.Background(), src, "job_1", tc.o, &out, &errw)
			if err != nil || code != tc.code || src.followed != tc.followed || src.after != tc.o.After {
				t.Fatalf("Follow = %d, %v (%s after %d); want %d (%s)", code, err, src.followed, src.after, tc.code, tc.followed)
			}
			if !strings.Contains(out.String(), tc.out) || !strings.Contains(errw.String(), tc.err) {
				t.Errorf("out %q, err %q; want %q and %q in them", out.String(), errw.String(), tc.out, tc.err)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code, err := Follow(ctx, &fakeEvents{}, "job_1", FollowOptions{}, &strings.Builder{}, &strings.Builder{}); code != 130 || err != nil {
		t.Errorf("interrupted: %d, %v; want 130", code, err)
	}
}
