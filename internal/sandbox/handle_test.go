package sandbox_test

import (
	"encoding/json"
	"testing"

	"github.com/agentbox/agentbox/internal/sandbox"
)

// v1Handle is a handle as the release before HandleVersion 2 saved it.
const v1Handle = `{"id":"0ccae3bf2b92","driver":"docker","job_id":"job_1","owner":"w1","ref":"e153","state_dir":"/d/s/0ccae3bf2b92","workspace_dir":"/d/w/job_1","uid":207275,"disk_bytes":10737418240,"workspace_owner":"0:0","running":true}`

func TestV1HandleDecodes(t *testing.T) {
	var h sandbox.Handle
	if err := json.Unmarshal([]byte(v1Handle), &h); err != nil {
		t.Fatal(err)
	}
	if h.ID != "0ccae3bf2b92" || h.Driver != "docker" || h.JobID != "job_1" || h.Owner != "w1" || h.Version != 1 {
		t.Errorf("handle %+v", h)
	}
	var st map[string]any
	if err := json.Unmarshal(h.State, &st); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"ref": "e153", "state_dir": "/d/s/0ccae3bf2b92", "workspace_dir": "/d/w/job_1", "uid": 207275.0,
		"disk_bytes": 10737418240.0, "workspace_owner": "0:0"}
	if len(st) != len(want) {
		t.Errorf("state %v, want %v", st, want)
	}
	for k, v := range want {
		if st[k] != v {
			t.Errorf("state[%s] = %v, want %v", k, st[k], v)
		}
	}
}

func TestV2HandleRoundTrips(t *testing.T) {
	h := sandbox.Handle{ID: "a", Driver: "docker", JobID: "j", Owner: "o", Version: sandbox.HandleVersion, State: json.RawMessage(`{"ref":"c"}`)}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"id":"a","driver":"docker","job_id":"j","owner":"o","version":2,"state":{"ref":"c"}}` {
		t.Errorf("encoded %s", b)
	}
	var back sandbox.Handle
	if err := json.Unmarshal(b, &back); err != nil || back.Version != 2 || string(back.State) != `{"ref":"c"}` || back.ID != "a" {
		t.Errorf("decoded %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte("null"), &back); err != nil || back.ID != "a" {
		t.Errorf("null: %+v, %v", back, err)
	}
}
