package api_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

func TestDeleteJob(t *testing.T) {
	e := apitest.New(t, api.Config{})
	pending := e.Submit("p").ID
	running := e.Submit("r").ID
	e.Start(running)
	for _, id := range []string{pending, running} {
		resp, b := do(t, e, req{method: "DELETE", path: "/v1/jobs/" + id})
		if got := wantError(t, resp, b, 409, wire.CodeNotEnded); !strings.Contains(got.Message, "cancel") {
			t.Errorf("DELETE of a live job: message %q does not say to cancel first", got.Message)
		}
	}
	resp, b := do(t, e, req{method: "DELETE", path: "/v1/jobs/job_nope"})
	wantError(t, resp, b, 404, wire.CodeNotFound)

	id := e.Submit("x").ID
	e.Start(id)
	e.Finish(id, store.StatusComplete, "")
	e.WriteFile(id, "hello.txt", "hello\n")
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(e.Workspace(id), "out")); err != nil {
		t.Fatal(err)
	}
	files := "/v1/jobs/" + id + "/files/hello.txt"
	if resp, b := do(t, e, req{method: "GET", path: files}); resp.StatusCode != 200 {
		t.Fatalf("file before DELETE: %d %s", resp.StatusCode, b)
	}

	first := deleteJob(t, e, id)
	if first.DeletedAt.IsZero() || first.Status != "complete" || first.JobID != id {
		t.Errorf("DELETE answered %+v; want the complete job with deleted_at", first)
	}
	if _, err := os.Lstat(e.Workspaces.Dir(id)); !os.IsNotExist(err) {
		t.Errorf("workspace after DELETE: %v, want it gone", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
		t.Errorf("a link's target was removed: %v", err)
	}
	if got := getJob(t, e, id); !got.DeletedAt.Equal(first.DeletedAt) || got.Status != "complete" {
		t.Errorf("GET after DELETE: status %s deleted_at %v; want the record kept", got.Status, got.DeletedAt)
	}
	for _, p := range []string{files, "/v1/jobs/" + id + "/artifacts.zip"} {
		resp, b := do(t, e, req{method: "GET", path: p})
		if got := wantError(t, resp, b, 410, wire.CodeDeleted); !strings.Contains(got.Message, "removed") {
			t.Errorf("GET %s: message %q", p, got.Message)
		}
	}
	again := deleteJob(t, e, id)
	if !again.DeletedAt.Equal(first.DeletedAt) {
		t.Errorf("second DELETE: deleted_at %v, want %v", again.DeletedAt, first.DeletedAt)
	}
	evs := events(t, e, id)
	var deleted []string
	for _, ev := range evs {
		if ev.Type == event.TypeDeleted {
			deleted = append(deleted, string(ev.Payload))
		}
	}
	if len(deleted) != 1 || evs[len(evs)-1].Type != event.TypeDeleted || evs[0].Type != event.TypeState {
		t.Fatalf("events after two DELETEs: %+v; want the log kept and one deleted event last", evs)
	}
	var p struct{ Reason string }
	if err := json.Unmarshal([]byte(deleted[0]), &p); err != nil || p.Reason != "api" {
		t.Errorf("deleted event payload %s, want reason api", deleted[0])
	}
}

func deleteJob(t *testing.T, e *apitest.Env, id string) wire.Job {
	t.Helper()
	resp, b := do(t, e, req{method: "DELETE", path: "/v1/jobs/" + id})
	if resp.StatusCode != 200 {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, b)
	}
	return decode[wire.Job](t, b)
}

func events(t *testing.T, e *apitest.Env, id string) []wire.Event {
	t.Helper()
	resp, b := do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/events"})
	if resp.StatusCode != 200 {
		t.Fatalf("events: %d %s", resp.StatusCode, b)
	}
	return decode[wire.EventPage](t, b).Events
}
