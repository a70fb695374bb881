package doctor

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

// TestModelCheck: the model check says "not configured", "works (model
// X, N ms)" after one request to the scripted model, and "fails" with a
// plain reason, within a few seconds, for a port nothing listens on.
func TestModelCheck(t *testing.T) {
	check := func(m config.Model, agent string) Check {
		cfg := config.Default()
		cfg.Model, cfg.Agent.Kind = m, agent
		return doctor{cfg: cfg}.modelCheck(context.Background())
	}
	if c := check(config.Model{}, "model"); c.Status != Warn || !strings.HasPrefix(c.Detail, "not configured") || !strings.Contains(c.Fix, "ANTHROPIC_API_KEY") {
		t.Errorf("no model: %+v", c)
	}
	if c := check(config.Model{}, "shell"); c.Status != OK || !strings.HasPrefix(c.Detail, "not configured, not needed") {
		t.Errorf("no model, shell agent: %+v", c)
	}

	fake := llmtest.New(t, llmtest.Steps(llmtest.Say("ok")))
	c := check(config.Model{Name: "openai:gpt-4.1", OpenAIKey: "k", OpenAIBaseURL: fake.OpenAIURL()}, "model")
	if c.Status != OK || !strings.HasPrefix(c.Detail, "works (model openai:gpt-4.1, ") || !strings.HasSuffix(c.Detail, " ms)") {
		t.Errorf("scripted model: %+v", c)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("%d requests, want one", n)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	begin := time.Now()
	c = check(config.Model{AnthropicKey: "k", AnthropicBaseURL: "http://" + addr}, "model")
	if took := time.Since(begin); took > 5*time.Second {
		t.Errorf("a closed port took %v to fail", took)
	}
	if c.Status != Fail || c.Detail != "fails (model anthropic:claude-sonnet-4-5): nothing listens at "+addr+" (connection refused)" || c.Fix == "" {
		t.Errorf("closed port: %+v", c)
	}
}
