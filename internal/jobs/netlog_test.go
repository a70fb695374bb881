package jobs_test

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/artifact"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
)

// TestArtifactsNetworkLog: the artifacts zip of a job whose sandbox
// reached out has network.jsonl at its root, a line per network event
// (time and payload) and nothing else of the log; a job without network
// events has none, and its workspace's own network.jsonl keeps its name.
func TestArtifactsNetworkLog(t *testing.T) {
	e := newEnv(t)
	svc, _ := e.start(t, jobs.ShellAgent{})
	withNet := await(t, svc, submit(t, svc, "echo hi > out.txt", store.Limits{}))
	without := await(t, svc, submit(t, svc, "echo mine > network.jsonl", store.Limits{}))
	for _, ev := range []event.Payload{
		event.Network{Decision: "allow", Host: "pypi.example", Port: 443, Protocol: "connect", BytesIn: 1200, Reason: "allowed by pypi.example"},
		event.Notice{Text: "not a connection"},
		event.Network{Decision: "deny", Host: "evil.example", Port: 443, Protocol: "connect", Reason: "evil.example:443 is not in the job's allow list"},
	} {
		typ, b, _ := event.Marshal(ev)
		if _, err := e.st.AppendEvent(bg, withNet.ID, typ, b); err != nil {
			t.Fatal(err)
		}
	}
	files := func(id string) map[string]string {
		var buf bytes.Buffer
		if _, err := svc.Artifacts(bg, id, &buf, artifact.Options{}); err != nil {
			t.Fatal(err)
		}
		zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, f := range zr.File {
			rc, _ := f.Open()
			b, _ := io.ReadAll(rc)
			rc.Close()
			out[f.Name] = string(b)
		}
		return out
	}
	got := files(withNet.ID)
	lines := strings.Split(strings.TrimSuffix(got[jobs.NetworkLogName], "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("network.jsonl has %d lines, want 2:\n%s", len(lines), got[jobs.NetworkLogName])
	}
	var first, second struct {
		Time string `json:"time"`
		event.Network
	}
	if json.Unmarshal([]byte(lines[0]), &first) != nil || json.Unmarshal([]byte(lines[1]), &second) != nil {
		t.Fatalf("lines are not JSON:\n%s", got[jobs.NetworkLogName])
	}
	if first.Time == "" || first.Host != "pypi.example" || first.BytesIn != 1200 || second.Decision != "deny" || second.Host != "evil.example" {
		t.Errorf("network.jsonl:\n%s", got[jobs.NetworkLogName])
	}
	if got["out.txt"] != "hi\n" {
		t.Errorf("the workspace is not in the zip: %v", got)
	}
	got = files(without.ID)
	if got[jobs.NetworkLogName] != "mine\n" {
		t.Errorf("a job without network: network.jsonl = %q", got[jobs.NetworkLogName])
	}
}
