package models_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/llm/models"
)

// TestPing: one request of one output token reaches the scripted model
// in each wire format.
func TestPing(t *testing.T) {
	for _, format := range []string{"anthropic", "openai"} {
		t.Run(format, func(t *testing.T) {
			fake := llmtest.New(t, llmtest.Steps(llmtest.Say("ok")))
			cfg := config.Model{Name: "anthropic:claude-sonnet-4-5", AnthropicKey: "k", AnthropicBaseURL: fake.AnthropicURL()}
			if format == "openai" {
				cfg = config.Model{Name: "openai:gpt-4.1", OpenAIKey: "k", OpenAIBaseURL: fake.OpenAIURL()}
			}
			info, took, err := models.Ping(context.Background(), "", cfg)
			if err != nil {
				t.Fatal(err)
			}
			reqs := fake.Requests()
			if len(reqs) != 1 || reqs[0].Format != format || reqs[0].MaxTokens != 1 || info.Provider != format || took <= 0 {
				t.Errorf("info %+v took %v, requests %+v; want one %s request for 1 token", info, took, reqs, format)
			}
		})
	}
}

// TestPingClosedPort: a port nothing listens on fails at once, without
// retries, and says so plainly.
func TestPingClosedPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	for _, cfg := range []config.Model{
		{Name: "anthropic:claude-sonnet-4-5", AnthropicKey: "k", AnthropicBaseURL: "http://" + addr},
		{Name: "openai:gpt-4.1", OpenAIKey: "k", OpenAIBaseURL: "http://" + addr + "/v1"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		begin := time.Now()
		_, _, err := models.Ping(ctx, "", cfg)
		cancel()
		if err == nil {
			t.Fatalf("%s: pinged a closed port", cfg.Name)
		}
		if took := time.Since(begin); took > 3*time.Second {
			t.Errorf("%s: failing took %v, want it at once (no retries)", cfg.Name, took)
		}
		if got := models.PlainReason(err); got != "nothing listens at "+addr+" (connection refused)" {
			t.Errorf("%s: reason %q (from %v)", cfg.Name, got, err)
		}
	}
}
