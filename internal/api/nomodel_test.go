package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/wire"
	"github.com/agentbox/agentbox/internal/wiring"
)

// TestNoModelRefusedAtSubmit: a server that runs agent jobs and has no
// model refuses them at submit, 400 no_model, saying what the operator
// sets on the server, and records nothing; one that can open the job's
// model takes it.
func TestNoModelRefusedAtSubmit(t *testing.T) {
	e := apitest.New(t, api.Config{})
	e.Configure(func(c *jobs.ServiceConfig) { c.CheckModel = wiring.ModelCheck(config.Model{}) })
	for _, body := range []string{`{"task":"x"}`, `{"task":"x","model":"anthropic:claude-sonnet-4-5"}`} {
		resp, b := do(t, e, req{method: "POST", path: "/v1/jobs", body: body})
		got := wantError(t, resp, b, http.StatusBadRequest, wire.CodeNoModel)
		for _, want := range []string{"operator", "agentbox serve", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENTBOX_MODEL"} {
			if !strings.Contains(got.Message, want) {
				t.Errorf("%s: message %q does not say %s", body, got.Message, want)
			}
		}
	}
	if resp, b := do(t, e, req{method: "GET", path: "/v1/jobs"}); resp.StatusCode != 200 || strings.Contains(string(b), "job_") {
		t.Errorf("a refused job was recorded: %d %s", resp.StatusCode, b)
	}

	// A key for one provider: its jobs are taken, another's refused.
	e.Configure(func(c *jobs.ServiceConfig) { c.CheckModel = wiring.ModelCheck(config.Model{OpenAIKey: "k"}) })
	submit(t, e, `{"task":"x"}`)
	resp, b := do(t, e, req{method: "POST", path: "/v1/jobs", body: `{"task":"x","model":"anthropic:claude-sonnet-4-5"}`})
	if got := wantError(t, resp, b, http.StatusBadRequest, wire.CodeNoModel); !strings.Contains(got.Message, "ANTHROPIC_API_KEY") {
		t.Errorf("message %q does not name the provider's key", got.Message)
	}
}
