package jobs_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
)

// turnAgent plays each turn of a job with the function of that turn, and
// records what each run was given.
type turnAgent struct {
	turns map[int]func(ctx context.Context, r *jobs.Run) (jobs.Outcome, error)

	mu   sync.Mutex
	runs []turnRun
}

// turnRun is what one run was given: the job, its sandbox, the messages
// its history held.
type turnRun struct {
	job       store.Job
	sandboxID string
	messages  []string
}

func (a *turnAgent) Run(ctx context.Context, r *jobs.Run) (jobs.Outcome, error) {
	hist, err := r.History(ctx)
	if err != nil {
		return jobs.Outcome{}, err
	}
	run := turnRun{job: r.Job, sandboxID: r.Sandbox.Handle().ID}
	for _, ev := range hist {
		if m, ok := event.As[event.Message](ev.Type, ev.Payload); ok {
			run.messages = append(run.messages, m.Text)
		}
	}
	a.mu.Lock()
	a.runs = append(a.runs, run)
	a.mu.Unlock()
	return a.turns[r.Job.Turn](ctx, r)
}

func shell(ctx context.Context, r *jobs.Run, line string) string {
	res, err := r.Sandbox.Guest().Exec(ctx, guest.Shell(line))
	if err != nil {
		return "exec: " + err.Error()
	}
	return strings.TrimSpace(string(res.Stdout))
}

// TestTurnsRunInNewSandboxesOnTheWorkspace: a message that came after the
// agent last read the log starts the job's next turn once the worker has
// recorded the end; a reply to the ended job starts the one after. Each
// turn runs in a new sandbox on the same workspace, as attempt 1, with the
// messages in its history; steps add up, and the log has no gap.
func TestTurnsRunInNewSandboxesOnTheWorkspace(t *testing.T) {
	e := newFakeEnv(t)
	var svc *jobs.Service
	agent := &turnAgent{turns: map[int]func(context.Context, *jobs.Run) (jobs.Outcome, error){
		1: func(ctx context.Context, r *jobs.Run) (jobs.Outcome, error) {
			shell(ctx, r, "echo from-turn-one > notes.txt")
			_, seen, err := r.Messages(ctx, 0)
			if err != nil {
				return jobs.Outcome{}, err
			}
			// The user speaks after the agent's last look at the log.
			if _, _, err := svc.Reply(ctx, r.Job.ID, "one more thing"); err != nil {
				return jobs.Outcome{}, err
			}
			return jobs.Outcome{Status: store.StatusComplete, Steps: 2, Result: "one", Seen: seen}, nil
		},
		2: func(ctx context.Context, r *jobs.Run) (jobs.Outcome, error) {
			return jobs.Outcome{Status: store.StatusComplete, Steps: 1, Result: shell(ctx, r, "cat notes.txt")}, nil
		},
		3: func(ctx context.Context, r *jobs.Run) (jobs.Outcome, error) {
			return jobs.Outcome{Status: store.StatusError, Steps: 1, Error: "three"}, nil
		},
	}}
	svc, _ = e.start(t, agent)
	id := submit(t, svc, "the task", store.Limits{})
	if j := awaitTurn(t, svc, id, 2); j.Status != store.StatusComplete || j.Result != "from-turn-one" {
		t.Fatalf("turn 2 ended %s with %q %q", j.Status, j.Result, j.Error)
	}
	if _, _, err := svc.Reply(bg, id, "and a third"); err != nil {
		t.Fatal(err)
	}
	j := awaitTurn(t, svc, id, 3)
	if j.Status != store.StatusError || j.Error != "three" || j.Attempts != 1 || j.Steps != 4 {
		t.Errorf("after turn 3: %s %q, attempts %d, steps %d", j.Status, j.Error, j.Attempts, j.Steps)
	}
	agent.mu.Lock()
	runs := agent.runs
	agent.mu.Unlock()
	if len(runs) != 3 {
		t.Fatalf("%d runs, want 3", len(runs))
	}
	seen := map[string]bool{}
	for i, r := range runs {
		if r.job.Turn != i+1 || r.job.Attempts != 1 || seen[r.sandboxID] {
			t.Errorf("run %d: turn %d, attempt %d, sandbox %s (used before: %v)", i, r.job.Turn, r.job.Attempts, r.sandboxID, seen[r.sandboxID])
		}
		seen[r.sandboxID] = true
	}
	if got := strings.Join(runs[2].messages, "|"); got != "one more thing|and a third" {
		t.Errorf("turn 3's history holds the messages %q", got)
	}
	var states []string
	for i, ev := range eventsOf(t, svc, id) {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, ev.Seq)
		}
		if st, ok := event.As[event.State](ev.Type, ev.Payload); ok {
			states = append(states, string(st.Status))
		} else if ev.Type == event.TypeMessage {
			states = append(states, "message")
		}
	}
	want := "pending running message complete pending running complete message pending running error"
	if got := strings.Join(states, " "); got != want {
		t.Errorf("states and messages:\n got %s\nwant %s", got, want)
	}
	e.assertNoSandboxes(t)
}

// awaitTurn waits for the job to end its turn-th turn.
func awaitTurn(t *testing.T, svc *jobs.Service, id string, turn int) store.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 2*time.Minute)
	defer cancel()
	for {
		evs, err := svc.Events(ctx, id, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		j, err := svc.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		// The job is read after its events: a reply made during the turn
		// may have put it at turn's start (pending) meanwhile.
		last := evs[len(evs)-1]
		if st, ok := event.As[event.State](last.Type, last.Payload); ok && st.Status.Final() && j.Turn == turn && j.Status.Final() {
			return j
		}
		if err := svc.WaitEvents(ctx, id, last.Seq, 200*time.Millisecond); err != nil {
			t.Fatalf("turn %d of job %s did not end: %v (status %s, turn %d)", turn, id, err, j.Status, j.Turn)
		}
	}
}
