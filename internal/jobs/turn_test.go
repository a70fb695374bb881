package jobs_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
)

// TestReplyStartsTheNextTurn: a message to an ended job puts it back to
// pending for its next turn, in one write: attempts, error, result, end,
// cancel, lease and sandbox cleared; steps and usage kept. The log goes
// on: the message, then the pending state.
func TestReplyStartsTheNextTurn(t *testing.T) {
	for _, status := range []store.Status{store.StatusComplete, store.StatusError, store.StatusCanceled} {
		t.Run(string(status), func(t *testing.T) {
			e := newDataEnv(t)
			id := e.job(status, time.Hour)
			if _, err := e.st.UpdateJob(t.Context(), id, func(j *store.Job) error {
				j.Attempts, j.Steps, j.Usage.InputTokens, j.Result, j.Error = 2, 7, 1000, "done", "it failed"
				j.CancelRequested, j.Sandbox = status == store.StatusCanceled, []byte(`{"id":"old"}`)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			e.emit(id, event.State{Status: status})
			j, ev, err := e.svc.Reply(t.Context(), id, "now add a test")
			if err != nil {
				t.Fatal(err)
			}
			got := e.get(id)
			if got.Status != store.StatusPending || got.Turn != 2 || got.Attempts != 0 || got.Result != "" || got.Error != "" ||
				!got.EndedAt.IsZero() || got.CancelRequested || len(got.Sandbox) != 0 || got.Steps != 7 || got.Usage.InputTokens != 1000 {
				t.Errorf("job after the reply: %+v", got)
			}
			if j.Turn != 2 || j.Status != store.StatusPending {
				t.Errorf("Reply returned the job %s turn %d", j.Status, j.Turn)
			}
			evs := e.events(id)
			if len(evs) != 3 || ev.Seq != 2 || evs[1].Type != event.TypeMessage || evs[2].Type != event.TypeState {
				t.Fatalf("log %v, message at %d", types(evs), ev.Seq)
			}
			if m, _ := event.As[event.Message](evs[1].Type, evs[1].Payload); m != (event.Message{Text: "now add a test", Turn: 2}) {
				t.Errorf("message event %+v", m)
			}
			if st, _ := event.As[event.State](evs[2].Type, evs[2].Payload); st.Status != store.StatusPending {
				t.Errorf("state event %+v", st)
			}
		})
	}
}

// TestReplySteersAnActiveJob: a message to a pending or running job is
// logged for its agent, in the job's current turn; the job is unchanged.
func TestReplySteersAnActiveJob(t *testing.T) {
	for _, status := range []store.Status{store.StatusPending, store.StatusRunning} {
		e := newDataEnv(t)
		id := e.job(status, 0)
		before := e.get(id)
		j, ev, err := e.svc.Reply(t.Context(), id, "use tabs")
		if err != nil {
			t.Fatal(err)
		}
		after := e.get(id)
		if j.Status != status || after.Status != status || after.Turn != 1 || !after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Errorf("%s: job %s turn %d after a steer (updated %v, was %v)", status, after.Status, after.Turn, after.UpdatedAt, before.UpdatedAt)
		}
		evs := e.events(id)
		if len(evs) != 1 || evs[0].Seq != ev.Seq || evs[0].Type != event.TypeMessage {
			t.Errorf("%s: log %v", status, types(evs))
		}
	}
}

func TestReplyRefusals(t *testing.T) {
	e := newDataEnv(t)
	ended := e.job(store.StatusComplete, time.Hour)
	deleted := e.job(store.StatusComplete, time.Hour)
	if _, err := e.svc.Delete(t.Context(), deleted); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, id, text string
		want           error
	}{
		{"empty", ended, "", jobs.ErrBadMessage},
		{"blank", ended, " \n\t ", jobs.ErrBadMessage},
		{"too long", ended, strings.Repeat("a", jobs.MaxTaskBytes+1), jobs.ErrBadMessage},
		{"not UTF-8", ended, "caf\xe9", jobs.ErrBadMessage},
		{"unknown job", "job_00000000000nope", "hi", store.ErrNotFound},
		{"deleted job", deleted, "hi", jobs.ErrDeleted},
	} {
		_, _, err := e.svc.Reply(t.Context(), tt.id, tt.text)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	if j := e.get(ended); j.Status != store.StatusComplete || len(e.events(ended)) != 0 {
		t.Errorf("a refused message changed the job: %s, %d events", j.Status, len(e.events(ended)))
	}
	e.svc = e.reconfigure(t, func(c *jobs.ServiceConfig) { c.NoMessages = "follow-up messages need the model agent" })
	if _, _, err := e.svc.Reply(t.Context(), ended, "hi"); !errors.Is(err, jobs.ErrBadMessage) || !strings.Contains(err.Error(), "model agent") {
		t.Errorf("a server refusing messages: %v", err)
	}
}

// TestReplyAndRetentionNeverBothWin: the janitor expiring jobs while
// replies continue them: each job ends up either deleted (its reply
// refused, its workspace gone) or continued (pending, its workspace
// kept), never a pending job without its data.
func TestReplyAndRetentionNeverBothWin(t *testing.T) {
	e := newDataEnv(t)
	var ids []string
	for range 20 {
		ids = append(ids, e.job(store.StatusComplete, 30*24*time.Hour))
	}
	jan := e.janitor(7 * 24 * time.Hour)
	replied := make([]error, len(ids))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := jan.Sweep(t.Context()); err != nil {
			t.Errorf("sweep: %v", err)
		}
	}()
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, replied[i] = e.svc.Reply(t.Context(), id, "more")
		}()
	}
	wg.Wait()
	for i, id := range ids {
		j, kept := e.get(id), exists(workspaceDir(e.dir, id))
		switch {
		case replied[i] == nil && j.Status == store.StatusPending && j.DeletedAt.IsZero() && kept:
		case errors.Is(replied[i], jobs.ErrDeleted) && j.Status == store.StatusComplete && !j.DeletedAt.IsZero() && !kept:
		default:
			t.Errorf("job %d: reply %v, job %s deleted %v, workspace kept %v", i, replied[i], j.Status, j.DeletedAt, kept)
		}
	}
}

func (e *dataEnv) events(id string) []store.Event {
	e.t.Helper()
	evs, err := e.st.Events(e.t.Context(), id, 0, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

func (e *dataEnv) emit(id string, p event.Payload) {
	e.t.Helper()
	typ, b, err := event.Marshal(p)
	if err == nil {
		_, err = e.st.AppendEvent(e.t.Context(), id, typ, b)
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

func types(evs []store.Event) string {
	var out []string
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%d:%s", ev.Seq, ev.Type))
	}
	return strings.Join(out, " ")
}
