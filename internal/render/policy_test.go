package render

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/wire"
)

func TestPolicyLine(t *testing.T) {
	many := make([]string, 15)
	for i := range many {
		many[i] = fmt.Sprintf("%q", fmt.Sprintf("h%d.example", i))
	}
	for _, tc := range []struct{ policy, want string }{
		{`{"mode": "none"}`, "none"},
		{`{}`, "none"},
		{`{"mode": "allow", "allow": ["pypi.org", "*.example.org:8443", {"host": "api.example", "methods": ["GET", "HEAD"]}], "deny": ["ads.example.org"], "presets": ["python"], "secrets": ["github"]}`,
			"allow pypi.org, *.example.org:8443, api.example (GET, HEAD); deny ads.example.org; presets python; secrets github"},
		{`{"mode": "allow", "presets": ["python", "node"]}`, "allow; presets python, node"},
		{`{"mode": "open", "deny": ["10.0.0.0/8"]}`, "open; deny 10.0.0.0/8"},
		{`{"mode": "allow", "allow": [` + strings.Join(many, ",") + `]}`, "allow h0.example, h1.example, h2.example, h3.example, h4.example, h5.example, h6.example, h7.example, h8.example, h9.example, h10.example, h11.example and 3 more"},
	} {
		var p egress.Policy
		if err := json.Unmarshal([]byte(tc.policy), &p); err != nil {
			t.Fatal(err)
		}
		if got := PolicyLine(p); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.policy, got, tc.want)
		}
	}
	// agentbox status shows it.
	var p egress.Policy
	_ = json.Unmarshal([]byte(`{"mode": "allow", "allow": ["pypi.org"], "secrets": ["github"]}`), &p)
	var b strings.Builder
	if err := Job(&b, wire.Job{JobID: "job_1", Status: "running", Network: p}); err != nil {
		t.Fatal(err)
	}
	if got := regexp.MustCompile(`: +`).ReplaceAllString(b.String(), ": "); !strings.Contains(got, "\nnetwork: allow pypi.org; secrets github\n") {
		t.Errorf("status lacks the network line:\n%s", b.String())
	}
}
