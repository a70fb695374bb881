package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/wire"
)

// netEnv is a test server whose operator defines preset python and secret
// github and forbids mode open.
func netEnv(t *testing.T) *apitest.Env {
	e := apitest.New(t, api.Config{})
	pypi, _ := egress.ParseRule("pypi.org")
	e.Configure(func(c *jobs.ServiceConfig) {
		c.Egress = &egress.Config{Presets: map[string][]egress.Rule{"python": {pypi}},
			Secrets: map[string]egress.Secret{"github": {Hosts: []string{"api.github.com"}, Header: "Authorization: Bearer {value}", Env: "GH_TOKEN"}},
			Modes:   []string{"none", "allow"}}
	})
	return e
}

// badPolicies are the bad policies of issue 26, each with the field its
// 400 names.
func badPolicies() []struct{ name, policy, field string } {
	many := make([]string, egress.MaxEntries+1)
	for i := range many {
		many[i] = fmt.Sprintf(`"h%d.example"`, i)
	}
	return []struct{ name, policy, field string }{
		{"unknown preset", `{"presets": ["python", "ruby"]}`, "network.presets[1]"},
		{"unknown secret", `{"secrets": ["gitlab"]}`, "network.secrets[0]"},
		{"forbidden mode", `{"mode": "open"}`, "network.mode"},
		{"no such mode", `{"mode": "some"}`, "network.mode"},
		{"malformed entry", `{"allow": ["pypi.org", "pypi.org:http", "x"]}`, "network.allow[1]"},
		{"malformed deny", `{"deny": [{"host": "a b"}]}`, "network.deny[0]"},
		{"methods on deny", `{"deny": [{"host": "x.example", "methods": ["GET"]}]}`, "network.deny[0]"},
		{"too many entries", `{"allow": [` + strings.Join(many, ",") + `]}`, "network.allow"},
		{"none with entries", `{"mode": "none", "allow": ["pypi.org"]}`, "network.mode"},
		{"unknown field", `{"hosts": ["pypi.org"]}`, "network"},
		{"wrong type", `{"allow": "pypi.org"}`, "network.allow"},
	}
}

func wantField(t *testing.T, what string, resp *http.Response, b []byte, field string) {
	t.Helper()
	got := wantError(t, resp, b, http.StatusBadRequest, wire.CodeBadRequest)
	if len(got.Fields) != 1 || got.Fields[0].Field != field || !strings.Contains(got.Message, field) {
		t.Errorf("%s: %+v; want a 400 naming %s", what, got, field)
	}
}

// TestSubmitNetworkPolicy: a job's policy is kept as checked, shown by
// GET /v1/jobs/{id}, and each bad policy is a 400 naming its field, in a
// JSON or a multipart submission, and makes no job.
func TestSubmitNetworkPolicy(t *testing.T) {
	e := netEnv(t)
	sr := submit(t, e, `{"task": "x", "network": {"allow": ["Files.example:8443", {"host": "api.example", "methods": ["get"]}], "deny": ["*.ads.example"], "presets": ["python"], "secrets": ["github"]}, "limits": {"egress": "1g"}}`)
	j := getJob(t, e, sr.JobID)
	b, _ := json.Marshal(j.Network)
	if want := `{"mode":"allow","allow":["files.example:8443",{"host":"api.example","methods":["GET"]}],"deny":["*.ads.example"],"presets":["python"],"secrets":["github"]}`; string(b) != want {
		t.Errorf("network %s, want %s", b, want)
	}
	if j.Limits.Egress != 1<<30 {
		t.Errorf("limits.egress %d", j.Limits.Egress)
	}
	if j := getJob(t, e, submit(t, e, `{"task": "x"}`).JobID); j.Network.Mode != "none" || !j.Network.IsZero() && len(j.Network.Allow) > 0 {
		t.Errorf("no policy: %+v, want mode none", j.Network)
	}
	for _, tc := range badPolicies() {
		resp, b := do(t, e, req{method: "POST", path: "/v1/jobs", body: `{"task": "x", "network": ` + tc.policy + `}`})
		wantField(t, tc.name, resp, b, tc.field)
	}
	// Refused before the upload is read: its archive is never looked at.
	resp, b := postMultipart(t, e, "/v1/jobs", nil, jobPart(`{"task": "x", "network": {"presets": ["ruby"]}}`), workspacePart([]byte("not an archive")))
	wantField(t, "multipart", resp, b, "network.presets[0]")
	resp, b = postMultipart(t, e, "/v1/jobs", nil, jobPart(`{"task": "x", "network": {"allow": ["bad host"]}}`), workspacePart(zipOf(t, map[string]string{"a.txt": "a"})))
	wantField(t, "multipart entry", resp, b, "network.allow[0]")
	sr = decode[wire.SubmitResponse](t, mustMultipart(t, e, `{"task": "x", "network": {"allow": ["pypi.org"]}}`))
	if j := getJob(t, e, sr.JobID); len(j.Network.Allow) != 1 || j.Network.Mode != "allow" {
		t.Errorf("multipart policy %+v", j.Network)
	}
	page := decode[wire.JobList](t, must(do(t, e, req{method: "GET", path: "/v1/jobs?limit=100"})))
	if len(page.Jobs) != 3 {
		t.Errorf("%d jobs, want 3: a refused policy makes none", len(page.Jobs))
	}
	resp, b = do(t, e, req{method: "POST", path: "/v1/jobs", body: `{"task": "x", "limits": {"egress": "1k"}}`})
	if got := wantError(t, resp, b, http.StatusUnprocessableEntity, wire.CodeValidation); !strings.Contains(got.Message, "limits.egress") {
		t.Errorf("small limits.egress: %+v", got)
	}
}

func mustMultipart(t *testing.T, e *apitest.Env, job string) []byte {
	t.Helper()
	resp, b := postMultipart(t, e, "/v1/jobs", nil, jobPart(job), workspacePart(zipOf(t, map[string]string{"a.txt": "a"})))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("multipart: %d %s", resp.StatusCode, b)
	}
	return b
}

func must(resp *http.Response, b []byte) []byte {
	if resp.StatusCode != http.StatusOK {
		panic(fmt.Sprintf("%d %s", resp.StatusCode, b))
	}
	return b
}

// TestPatchNetwork: a change answers the policy in force, is what GET
// shows, is recorded with who made it, and reaches the job's watcher
// before the answer; bad policies are refused as at submit.
func TestPatchNetwork(t *testing.T) {
	e := netEnv(t)
	j := e.Submit("x")
	var seen []egress.Policy
	defer e.Svc.WatchNetwork(j.ID, func(p egress.Policy) { seen = append(seen, p) })()
	resp, b := do(t, e, req{method: "PATCH", path: "/v1/jobs/" + j.ID + "/network", body: `{"allow": ["late.test"], "presets": ["python"]}`})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PATCH: %d %s", resp.StatusCode, b)
	}
	if got := decode[egress.Policy](t, b); got.Mode != "allow" || len(got.Allow) != 1 || got.Allow[0].Host != "late.test" {
		t.Errorf("answer %s", b)
	}
	if len(seen) != 1 || seen[0].Allow[0].Host != "late.test" {
		t.Errorf("watcher saw %+v before the answer", seen)
	}
	if got := getJob(t, e, j.ID).Network; len(got.Allow) != 1 || got.Presets[0] != "python" {
		t.Errorf("GET shows %+v", got)
	}
	evs := decode[wire.EventPage](t, must(do(t, e, req{method: "GET", path: "/v1/jobs/" + j.ID + "/events"})))
	last := evs.Events[len(evs.Events)-1]
	var np event.NetworkPolicy
	if last.Type != "network_policy" || json.Unmarshal(last.Payload, &np) != nil || np.By != "api" || !strings.Contains(string(np.Policy), "late.test") {
		t.Errorf("last event %s %s", last.Type, last.Payload)
	}
	// An ended job takes a change for its next turn.
	e.Finish(j.ID, "complete", "")
	resp, b = do(t, e, req{method: "PATCH", path: "/v1/jobs/" + j.ID + "/network", body: `{"mode": "none"}`})
	if resp.StatusCode != http.StatusOK || getJob(t, e, j.ID).Network.Mode != "none" {
		t.Errorf("PATCH of an ended job: %d %s", resp.StatusCode, b)
	}
	for _, tc := range badPolicies() {
		resp, b := do(t, e, req{method: "PATCH", path: "/v1/jobs/" + j.ID + "/network", body: tc.policy})
		wantField(t, tc.name, resp, b, tc.field)
	}
	if got := getJob(t, e, j.ID).Network; got.Mode != "none" || len(seen) != 2 {
		t.Errorf("after refused changes: %+v, watcher called %d times", got, len(seen))
	}
	resp, b = do(t, e, req{method: "PATCH", path: "/v1/jobs/job_missing/network", body: `{"mode": "none"}`})
	wantError(t, resp, b, http.StatusNotFound, wire.CodeNotFound)
	resp, b = do(t, e, req{method: "PATCH", path: "/v1/jobs/" + j.ID + "/network", body: `{"mode": "none"}`, noAuth: true})
	wantError(t, resp, b, http.StatusUnauthorized, wire.CodeUnauthorized)
}

// TestNetworkSummary: GET /v1/jobs/{id}/network sums the job's network
// events per host and port.
func TestNetworkSummary(t *testing.T) {
	e := netEnv(t)
	sr := submit(t, e, `{"task": "x", "network": {"allow": ["pypi.org"]}}`)
	e.Emit(sr.JobID, event.Network{Host: "pypi.org", Port: 443, Decision: "allow", BytesIn: 1000, BytesOut: 100, Protocol: "connect", Reason: "allowed by pypi.org"})
	e.Emit(sr.JobID, event.Network{Host: "late.test", Port: 443, Decision: "deny", Protocol: "connect", Reason: "late.test:443 is not in the job's allow list"})
	e.Emit(sr.JobID, event.Network{Host: "pypi.org", Port: 443, Decision: "allow", BytesIn: 24, BytesOut: 4, Protocol: "connect", Reason: "allowed by pypi.org"})
	got := decode[wire.NetworkSummary](t, must(do(t, e, req{method: "GET", path: "/v1/jobs/" + sr.JobID + "/network"})))
	want := wire.NetworkSummary{Connections: 3, Hosts: []wire.NetworkHost{
		{Host: "late.test", Port: 443, Denied: 1, LastDecision: "deny", LastReason: "late.test:443 is not in the job's allow list"},
		{Host: "pypi.org", Port: 443, Allowed: 2, BytesIn: 1024, BytesOut: 104, LastDecision: "allow", LastReason: "allowed by pypi.org"},
	}}
	if fmt.Sprint(got.Hosts) != fmt.Sprint(want.Hosts) || got.Connections != 3 || got.Truncated || got.Policy.Mode != "allow" {
		t.Errorf("summary %+v", got)
	}
	empty := must(do(t, e, req{method: "GET", path: "/v1/jobs/" + e.Submit("y").ID + "/network"}))
	if !strings.Contains(string(empty), `"hosts":[]`) || !strings.Contains(string(empty), `"policy":{"mode":"none"}`) {
		t.Errorf("no connections: %s", empty)
	}
	resp, b := do(t, e, req{method: "GET", path: "/v1/jobs/job_missing/network"})
	wantError(t, resp, b, http.StatusNotFound, wire.CodeNotFound)
}

// TestNetworkIdempotency: the policy is part of what an Idempotency-Key
// covers.
func TestNetworkIdempotency(t *testing.T) {
	e := netEnv(t)
	key := map[string]string{"Idempotency-Key": "k1"}
	body := `{"task": "x", "network": {"allow": ["pypi.org"]}}`
	resp, b := do(t, e, req{method: "POST", path: "/v1/jobs", body: body, header: key})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if resp, b := do(t, e, req{method: "POST", path: "/v1/jobs", body: body, header: key}); resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay: %d %s", resp.StatusCode, b)
	}
	resp, b = do(t, e, req{method: "POST", path: "/v1/jobs", body: `{"task": "x", "network": {"allow": ["evil.example"]}}`, header: key})
	wantError(t, resp, b, http.StatusUnprocessableEntity, wire.CodeIdempotencyConflict)
}
