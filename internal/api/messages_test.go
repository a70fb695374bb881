package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

// TestReplyContinuesAnEndedJob: a message to an ended job answers 202
// with the job pending in its next turn and Location at the message in
// its log; a stream from the start goes on past the first turn's end to
// the second's.
func TestReplyContinuesAnEndedJob(t *testing.T) {
	e := apitest.New(t, api.Config{})
	id := e.Submit("x").ID                 // 1 pending
	e.Start(id)                            // 2 running
	e.Finish(id, store.StatusComplete, "") // 3 complete
	resp, b := do(t, e, req{method: "POST", path: "/v1/jobs/" + id + "/messages", body: `{"message": "now add tests"}`})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("reply: %d %s", resp.StatusCode, b)
	}
	if j := decode[wire.Job](t, b); j.Status != "pending" || j.Turn != 2 || j.Result != "" || !j.EndedAt.IsZero() {
		t.Errorf("answered job %s, turn %d, result %q, ended %v", j.Status, j.Turn, j.Result, j.EndedAt)
	}
	if loc := resp.Header.Get("Location"); loc != "/v1/jobs/"+id+"/events?after=3" {
		t.Errorf("Location %q", loc)
	}
	if j := getJob(t, e, id); j.Turn != 2 || j.Links.Messages != "/v1/jobs/"+id+"/messages" {
		t.Errorf("job turn %d, links %+v", j.Turn, j.Links)
	}
	s := openStream(t, e, "/v1/jobs/"+id+"/events", nil)
	var seqs []string
	for range 5 { // the first turn, the message (4), the pending state (5)
		ev, ok := s.next()
		if !ok {
			t.Fatalf("the stream ended after %v", seqs)
		}
		seqs = append(seqs, ev.event)
	}
	if got := strings.Join(seqs, " "); got != "state state state message state" {
		t.Errorf("events %s", got)
	}
	e.Start(id)                            // 6
	e.Finish(id, store.StatusComplete, "") // 7
	if got := s.rest(); !slices.Equal(got, []int64{6, 7}) {
		t.Errorf("events after the reply %v, want [6 7] and the end of the stream", got)
	}
}

// TestReplySteersARunningJob: a message to a running job is logged in its
// turn and answered 202 with the job as it is.
func TestReplySteersARunningJob(t *testing.T) {
	e := apitest.New(t, api.Config{})
	id := e.Submit("x").ID
	e.Start(id)
	resp, b := do(t, e, req{method: "POST", path: "/v1/jobs/" + id + "/messages", body: `{"message": "use tabs"}`})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("reply: %d %s", resp.StatusCode, b)
	}
	if j := decode[wire.Job](t, b); j.Status != "running" || j.Turn != 1 {
		t.Errorf("answered job %s turn %d", j.Status, j.Turn)
	}
	evs, err := e.Store.Events(t.Context(), id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if m, ok := event.As[event.Message](last.Type, last.Payload); !ok || m.Text != "use tabs" || m.Turn != 1 {
		t.Errorf("last event %s %s", last.Type, last.Payload)
	}
}

func TestReplyErrors(t *testing.T) {
	e := apitest.New(t, api.Config{})
	ended := e.Submit("x").ID
	e.Finish(ended, store.StatusComplete, "")
	deleted := e.Submit("y").ID
	e.Finish(deleted, store.StatusComplete, "")
	if resp, b := do(t, e, req{method: "DELETE", path: "/v1/jobs/" + deleted}); resp.StatusCode != http.StatusOK {
		t.Fatalf("delete: %d %s", resp.StatusCode, b)
	}
	for _, tt := range []struct {
		name, id, body string
		status         int
		code           string
	}{
		{"empty", ended, `{"message": ""}`, 400, wire.CodeBadRequest},
		{"blank", ended, `{"message": " \n\t"}`, 400, wire.CodeBadRequest},
		{"no message", ended, `{}`, 400, wire.CodeBadRequest},
		{"unknown field", ended, `{"message": "hi", "turn": 3}`, 400, wire.CodeBadRequest},
		{"not UTF-8", ended, "{\"message\": \"caf\xe9\"}", 400, wire.CodeBadRequest},
		{"too long", ended, `{"message": "` + strings.Repeat("a", 256<<10+1) + `"}`, 400, wire.CodeBadRequest},
		{"unknown job", "job_00000000000nope", `{"message": "hi"}`, 404, wire.CodeNotFound},
		{"deleted job", deleted, `{"message": "hi"}`, 410, wire.CodeDeleted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := do(t, e, req{method: "POST", path: "/v1/jobs/" + tt.id + "/messages", body: tt.body})
			wantError(t, resp, b, tt.status, tt.code)
		})
	}
	if j := getJob(t, e, ended); j.Status != "complete" || j.Turn != 1 {
		t.Errorf("refused messages changed the job: %s turn %d", j.Status, j.Turn)
	}
	resp, b := do(t, e, req{method: "GET", path: "/v1/jobs/" + ended + "/messages"})
	wantError(t, resp, b, http.StatusMethodNotAllowed, wire.CodeMethodNotAllowed)
}
