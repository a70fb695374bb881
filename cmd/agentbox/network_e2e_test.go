package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeEgressSettings: a real server reads the egress settings, gives
// a job that states no policy the operator's default, refuses an unknown
// preset naming the field, takes a PATCH; a bad default stops it at start,
// naming the variable.
func TestServeEgressSettings(t *testing.T) {
	t.Parallel()
	presets := filepath.Join(t.TempDir(), "presets.json")
	if err := os.WriteFile(presets, []byte(`{"python": ["pypi.org", "files.pythonhosted.org"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, "AGENTBOX_CONCURRENCY=0", "AGENTBOX_EGRESS_PRESETS="+presets, `AGENTBOX_EGRESS_DEFAULT={"presets":["python"]}`,
		"AGENTBOX_EGRESS_MODES=none,allow")
	s.start()
	var j struct {
		JobID   string          `json:"job_id"`
		Network json.RawMessage `json:"network"`
	}
	id, code := s.submit("x")
	if s.do("GET", "/v1/jobs/"+id, nil, &j); code != 201 || string(j.Network) != `{"mode":"allow","presets":["python"]}` {
		t.Errorf("default policy: %d %s", code, j.Network)
	}
	var e struct {
		Error struct {
			Message string `json:"message"`
			Fields  []struct{ Field string }
		} `json:"error"`
	}
	if code := s.do("POST", "/v1/jobs", map[string]any{"task": "x", "network": map[string]any{"presets": []string{"node"}}}, &e); code != 400 ||
		len(e.Error.Fields) != 1 || e.Error.Fields[0].Field != "network.presets[0]" || !strings.Contains(e.Error.Message, "known: python") {
		t.Errorf("unknown preset: %d %+v", code, e)
	}
	var p json.RawMessage
	if code := s.do("PATCH", "/v1/jobs/"+id+"/network", map[string]any{"allow": []string{"late.test"}}, &p); code != 200 || string(p) != `{"mode":"allow","allow":["late.test"]}` {
		t.Errorf("PATCH: %d %s", code, p)
	}

	bad := exec.Command(guestBinary, "serve")
	bad.Env = append(s.env, `AGENTBOX_EGRESS_DEFAULT={"presets":["ruby"]}`)
	out, err := bad.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "AGENTBOX_EGRESS_DEFAULT") || !strings.Contains(string(out), "presets[0]") {
		t.Errorf("serve with a bad default: %v\n%s", err, out)
	}
}
