package anthropic_test

import (
	"encoding/json"
	"reflect"
	"slices"
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

// TestComputerUseWire checks the native computer tool on the wire: the
// documented JSON of computer_20250124 in the tool's place, the beta header
// it needs, the cache breakpoint when it is the last tool, and neither
// beta nor native tool for a request without it.
func TestComputerUseWire(t *testing.T) {
	s := llmtest.New(t, llmtest.Steps(llmtest.Say("a"), llmtest.Say("b")))
	m := newModel(t, s, false)
	req := providertest.Ask("hi")
	req.Tools = append(req.Tools, providertest.ComputerTool)
	providertest.Collect(t, m, req)
	providertest.Collect(t, m, providertest.Ask("hi"))
	var body struct {
		Tools []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal(s.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": "computer_20250124", "name": "computer", "display_width_px": 1366.0,
		"display_height_px": 768.0, "display_number": 1.0, "cache_control": map[string]any{"type": "ephemeral"}}
	if got := body.Tools[2]; !reflect.DeepEqual(got, want) {
		t.Errorf("computer tool sent as %v, want %v", got, want)
	}
	if body.Tools[1]["cache_control"] != nil {
		t.Error("the breakpoint is not on the last tool only")
	}
	if got := s.Requests()[0].Beta; !slices.Equal(got, []string{"computer-use-2025-01-24"}) {
		t.Errorf("anthropic-beta %v, want computer-use-2025-01-24", got)
	}
	if got := s.Requests()[1].Beta; len(got) != 0 {
		t.Errorf("a request without the computer tool sent anthropic-beta %v", got)
	}
}

// TestComputerToolWithoutDisplay: a computer tool the API could not take
// natively (no display size, another name) goes as a function.
func TestComputerToolWithoutDisplay(t *testing.T) {
	for _, tool := range []llm.Tool{
		{Name: "computer", Description: "d", InputSchema: providertest.ComputerTool.InputSchema, Native: &llm.NativeTool{Kind: llm.NativeKindComputer}},
		{Name: "desktop", Description: "d", InputSchema: providertest.ComputerTool.InputSchema, Native: providertest.ComputerTool.Native},
	} {
		s := llmtest.New(t, llmtest.Steps(llmtest.Say("a")))
		req := providertest.Ask("hi")
		req.Tools = append(req.Tools, tool)
		providertest.Collect(t, newModel(t, s, false), req)
		rec := s.Requests()[0]
		if got := rec.ToolSpecs[2]; got.Native != nil || got.Name != tool.Name || len(rec.Beta) != 0 {
			t.Errorf("%s: sent as %+v with beta %v, want a function", tool.Name, got, rec.Beta)
		}
	}
}
