package ui_test

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/ui"
	"github.com/agentbox/agentbox/internal/wiring"
)

// TestNewJobPlaceholders: the new-job form's placeholders are the
// server's real defaults, as its configuration sets them, not text of
// their own.
func TestNewJobPlaceholders(t *testing.T) {
	for name, tt := range map[string]struct {
		set  func(*config.Config)
		want []string
	}{
		"defaults": {func(c *config.Config) { c.Model.AnthropicKey = "k" },
			[]string{`id="model"`, `placeholder="anthropic:claude-sonnet-4-5"`, `placeholder="30m"`, `placeholder="100"`, `placeholder="2g"`, `placeholder="1"`, `placeholder="10g"`}},
		"configured": {func(c *config.Config) {
			c.Model.Name = "openai:gpt-x"
			c.Server.JobTimeout = 90 * time.Minute
			c.Agent.MaxSteps = 7
			c.Sandbox.MemoryBytes = 512 << 20
			c.Sandbox.NanoCPUs = 1.5e9
			c.Sandbox.DiskBytes = 3 << 30
		}, []string{`placeholder="openai:gpt-x"`, `placeholder="1h30m"`, `placeholder="7"`, `placeholder="512m"`, `placeholder="1.5"`, `placeholder="3g"`}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := config.Default()
			tt.set(&cfg)
			u := ui.New(ui.Config{Defaults: wiring.Defaults(cfg)}, nil, nil)
			w := httptest.NewRecorder()
			if err := u.NewJob(w, httptest.NewRequest("GET", "/new", nil), ui.Session{CSRF: "c"}); err != nil {
				t.Fatal(err)
			}
			page := w.Body.String()
			for _, want := range tt.want {
				if !strings.Contains(page, want) {
					t.Errorf("the form lacks %s", want)
				}
			}
			if name == "configured" && strings.Contains(page, "claude-sonnet") {
				t.Error("the form names a model the server does not use")
			}
		})
	}
}
