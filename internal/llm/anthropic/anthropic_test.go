package anthropic_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/anthropic"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/llm/llmtest/providertest"
)

// TestConformance runs the suite every llm.Model passes; the error shapes
// of the Messages API are in errors_test.go.
func TestConformance(t *testing.T) {
	providertest.Run(t, providertest.Provider{
		Open: func(t *testing.T, s *llmtest.Server, o providertest.Options) llm.Model {
			return newModel(t, s, o.NoStream, func(c *anthropic.Config) {
				c.MaxRetries, c.MaxOutput, c.Price = o.MaxRetries, o.MaxOutput, o.Price
			})
		},
		Info: llm.ModelInfo{Provider: "anthropic", Name: "claude-test-4", ContextWindow: anthropic.DefaultContextWindow,
			MaxOutputTokens: anthropic.DefaultMaxOutput, NativeComputerUse: true},
		APIKey:       "sk-ant-test",
		ToolIDPrefix: "toolu_",
		// The SDK waits out any Retry-After, however long.
		LongRetryAfter:  time.Hour,
		Errors:          errorCases,
		MidStreamErrors: midStreamErrors,
	})
}

func newModel(t *testing.T, s *llmtest.Server, noStream bool, edit ...func(*anthropic.Config)) *anthropic.Model {
	t.Helper()
	cfg := anthropic.Config{Name: "claude-test-4", APIKey: "sk-ant-test", BaseURL: s.AnthropicURL(), NoStream: noStream}
	for _, e := range edit {
		e(&cfg)
	}
	m, err := anthropic.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// TestPromptCaching checks the breakpoints on the wire: the system prompt,
// the last tool and the last message.
func TestPromptCaching(t *testing.T) {
	s := llmtest.New(t, llmtest.Steps(llmtest.Say("ok")))
	providertest.Collect(t, newModel(t, s, false), providertest.Ask("hi"))
	var body struct {
		System []struct {
			CacheControl *struct{ Type string } `json:"cache_control"`
		}
		Tools []struct {
			CacheControl *struct{ Type string } `json:"cache_control"`
		}
		Messages []struct {
			Content []struct {
				CacheControl *struct{ Type string } `json:"cache_control"`
			}
		}
	}
	if err := json.Unmarshal(s.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	msgs := body.Messages
	last := msgs[len(msgs)-1].Content
	switch {
	case body.System[0].CacheControl == nil || body.System[0].CacheControl.Type != "ephemeral":
		t.Error("system prompt has no cache breakpoint")
	case body.Tools[0].CacheControl != nil || body.Tools[1].CacheControl == nil:
		t.Error("the breakpoint is not on the last tool only")
	case last[len(last)-1].CacheControl == nil:
		t.Error("last message has no cache breakpoint")
	}
}
