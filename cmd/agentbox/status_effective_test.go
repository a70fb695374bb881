package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/wiring"
)

// TestStatusShowsModelAndLimits: status shows the model a job runs with
// (the server's default when it named none) and its effective limits:
// what it asked for, the server's defaults for the rest.
func TestStatusShowsModelAndLimits(t *testing.T) {
	cfg := config.Default()
	cfg.Model.AnthropicKey = "k"
	cfg.Server.JobTimeout = 45 * time.Minute
	e := apitest.New(t, api.Config{Defaults: wiring.Defaults(cfg)})
	t.Setenv("AGENTBOX_URL", e.URL)
	t.Setenv("AGENTBOX_TOKEN", apitest.Token)
	t.Setenv("AGENTBOX_DATA_DIR", t.TempDir())
	out, _ := mustRun(t, "submit", "--memory", "1g", "do it")
	id := strings.TrimSpace(out)
	if _, err := e.Svc.Get(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	out, _ = mustRun(t, "status", id)
	for _, want := range []string{"anthropic:claude-sonnet-4-5 (the server's default)", "45m timeout", "100 steps", "1GiB memory", "1 CPU", "10GiB disk"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}
