package models_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/llm/models"
)

func TestOpen(t *testing.T) {
	tests := []struct {
		name     string
		spec     string
		cfg      config.Model
		provider string
		model    string
	}{
		{"spec", "anthropic:claude-opus-4-5", config.Model{AnthropicKey: "k"}, "anthropic", "claude-opus-4-5"},
		{"spec over AGENTBOX_MODEL", "openai:gpt-4o", config.Model{Name: "anthropic:claude-haiku-4-5", AnthropicKey: "k", OpenAIKey: "k"}, "openai", "gpt-4o"},
		{"AGENTBOX_MODEL", "", config.Model{Name: "openai:llama3.1", OpenAIBaseURL: "http://localhost:11434/v1"}, "openai", "llama3.1"},
		{"anthropic key only", "", config.Model{AnthropicKey: "k"}, "anthropic", models.DefaultAnthropic},
		{"openai key only", "", config.Model{OpenAIKey: "k"}, "openai", models.DefaultOpenAI},
		{"both keys: anthropic first", "", config.Model{AnthropicKey: "k", OpenAIKey: "k"}, "anthropic", models.DefaultAnthropic},
		{"name with a colon", "openai:qwen2.5-coder:32b", config.Model{OpenAIBaseURL: "http://x/v1"}, "openai", "qwen2.5-coder:32b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := models.Open(tt.spec, tt.cfg)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if info := m.Info(); info.Provider != tt.provider || info.Name != tt.model {
				t.Errorf("opened %s:%s, want %s:%s", info.Provider, info.Name, tt.provider, tt.model)
			}
		})
	}
}

func TestOpenNotConfigured(t *testing.T) {
	tests := []struct {
		name     string
		spec     string
		cfg      config.Model
		mentions []string
	}{
		{"nothing set", "", config.Model{}, []string{
			"export ANTHROPIC_API_KEY=", "export OPENAI_API_KEY=",
			"export OPENAI_BASE_URL=http://localhost:11434/v1 AGENTBOX_MODEL=openai:llama3.1",
		}},
		{"base URL without a model", "", config.Model{OpenAIBaseURL: "http://localhost:11434/v1"}, []string{"AGENTBOX_MODEL=openai:NAME"}},
		{"anthropic without key", "anthropic:claude-sonnet-4-5", config.Model{OpenAIKey: "k"}, []string{"ANTHROPIC_API_KEY"}},
		{"openai without key", "openai:gpt-4.1", config.Model{AnthropicKey: "k"}, []string{"OPENAI_API_KEY"}},
		{"unknown provider", "gemini:pro", config.Model{AnthropicKey: "k"}, []string{"anthropic:NAME or openai:NAME"}},
		{"no name", "anthropic:", config.Model{AnthropicKey: "k"}, []string{"anthropic:NAME"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := models.Open(tt.spec, tt.cfg)
			if !errors.Is(err, llm.ErrNotConfigured) {
				t.Fatalf("err = %v; want ErrNotConfigured", err)
			}
			for _, m := range tt.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error does not say %q:\n%v", m, err)
				}
			}
		})
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		name   string
		found  bool
		window int
		input  float64
	}{
		{"claude-sonnet-4-5", true, 200_000, 3},
		{"claude-sonnet-4-5-20250929", true, 200_000, 3},
		{"anthropic/claude-sonnet-4.5", true, 200_000, 3},
		{"claude-opus-4-5", true, 200_000, 5},
		{"claude-opus-4-1-20250805", true, 200_000, 15},
		{"claude-opus-4.1", true, 200_000, 15},
		{"claude-opus-4-20250514", true, 200_000, 15},
		{"claude-haiku-4-5@20251001", true, 200_000, 1},
		{"gpt-4.1", true, 1_047_576, 2},
		{"gpt-4.1-mini", true, 1_047_576, 0.4},
		{"gpt-4o-2024-08-06", true, 128_000, 2.5},
		{"gpt-4o-mini", true, 128_000, 0.15},
		{"gpt-5", true, 400_000, 1.25},
		{"openai/gpt-5-mini", true, 400_000, 0.25},
		{"llama3.1:8b", true, 131_072, 0},
		{"qwen2.5-coder:32b", true, 32_768, 0},
		{"some-new-model", false, models.UnknownContextWindow, 0},
	}
	for _, tt := range tests {
		k, found := models.Lookup(tt.name)
		if found != tt.found || k.ContextWindow != tt.window || k.Price.InputPerMTok != tt.input {
			t.Errorf("Lookup(%q) = %+v, %v; want window %d input $%v", tt.name, k, found, tt.window, tt.input)
		}
	}
}

// TestOpenedModelsWork runs both providers, as Open builds them, against
// the scripted model, with the table's description of each.
func TestOpenedModelsWork(t *testing.T) {
	s := llmtest.New(t, llmtest.Steps(llmtest.Say("from claude"), llmtest.Say("from llama")))
	cfg := config.Model{AnthropicKey: "sk-ant", AnthropicBaseURL: s.AnthropicURL(), OpenAIBaseURL: s.OpenAIURL()}
	for _, spec := range []string{"anthropic:claude-sonnet-4-5", "openai:llama3.1"} {
		m, err := models.Open(spec, cfg)
		if err != nil {
			t.Fatal(err)
		}
		seq, err := m.Stream(context.Background(), llm.Request{Messages: []llm.Message{llm.Text(llm.RoleUser, "hi")}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := llm.Collect(seq, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %q, %+v", spec, resp.Message.PlainText(), m.Info())
	}
	reqs := s.Requests()
	if len(reqs) != 2 || reqs[0].Format != "anthropic" || reqs[1].Format != "openai" || reqs[0].MaxTokens != 64_000 {
		t.Errorf("requests %+v", reqs)
	}
}

// TestDocsListEveryModel keeps docs/models.md in step with the table.
func TestDocsListEveryModel(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/models.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range models.Table() {
		if !strings.Contains(string(doc), "`"+k.Prefix+"`") {
			t.Errorf("docs/models.md does not list `%s`", k.Prefix)
		}
	}
}
