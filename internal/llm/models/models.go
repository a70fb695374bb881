// Package models opens the llm.Model a user asked for: it resolves a spec
// ("anthropic:claude-sonnet-4-5", "openai:llama3.1", or nothing, to use the
// configured default), builds the provider's client from the model config,
// and describes well-known models (context window, output limit, price)
// from its table.
package models

import (
	"fmt"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/anthropic"
	"github.com/agentbox/agentbox/internal/llm/openai"
)

// The models used when only a key is configured.
const (
	DefaultAnthropic = "claude-sonnet-4-5"
	DefaultOpenAI    = "gpt-4.1"
)

// notConfigured is the message for a machine with no model configured.
const notConfigured = `no language model is configured. Set one of:
  export ANTHROPIC_API_KEY=…    (Anthropic; the model defaults to ` + DefaultAnthropic + `)
  export OPENAI_API_KEY=…       (OpenAI; the model defaults to ` + DefaultOpenAI + `)
  export OPENAI_BASE_URL=http://localhost:11434/v1 AGENTBOX_MODEL=openai:llama3.1    (Ollama, or any OpenAI-compatible server)
A model is chosen with --model provider:name or AGENTBOX_MODEL (anthropic:NAME or openai:NAME)`

// Open returns the model spec names ("provider:name"); an empty spec means
// cfg.Name (AGENTBOX_MODEL), and if that is empty too, the default model of
// the provider whose key is set, Anthropic first. Nothing configured is
// llm.ErrNotConfigured with a message saying what to set.
func Open(spec string, cfg config.Model) (llm.Model, error) {
	return open(spec, cfg, 0)
}

// open is Open with retries as llm.ClientConfig.MaxRetries takes them.
func open(spec string, cfg config.Model, retries int) (llm.Model, error) {
	provider, name, err := resolve(spec, cfg)
	if err != nil {
		return nil, err
	}
	known, _ := Lookup(name)
	switch provider {
	case "anthropic":
		return anthropic.New(anthropic.Config{
			Name: name, APIKey: cfg.AnthropicKey, BaseURL: cfg.AnthropicBaseURL, MaxRetries: retries,
			Price: known.Price, ContextWindow: known.ContextWindow, MaxOutput: known.MaxOutput,
		})
	default:
		return openai.New(openai.Config{
			Name: name, APIKey: cfg.OpenAIKey, BaseURL: cfg.OpenAIBaseURL, MaxRetries: retries,
			Price: known.Price, ContextWindow: known.ContextWindow, MaxOutput: known.MaxOutput,
		})
	}
}

// resolve picks the provider and model name.
func resolve(spec string, cfg config.Model) (provider, name string, err error) {
	if spec == "" {
		spec = cfg.Name
	}
	if spec != "" {
		return llm.ParseSpec(spec)
	}
	switch {
	case cfg.AnthropicKey != "":
		return "anthropic", DefaultAnthropic, nil
	case cfg.OpenAIBaseURL != "":
		// A local server's models have names of its own: guessing one
		// would only turn into an unknown-model error later.
		return "", "", fmt.Errorf("%w: OPENAI_BASE_URL is %s but no model is named: set AGENTBOX_MODEL=openai:NAME with a model the server serves (for Ollama, one `ollama list` shows, e.g. openai:llama3.1)",
			llm.ErrNotConfigured, cfg.OpenAIBaseURL)
	case cfg.OpenAIKey != "":
		return "openai", DefaultOpenAI, nil
	}
	return "", "", fmt.Errorf("%w: %s", llm.ErrNotConfigured, notConfigured)
}

// DefaultSpec is the "provider:name" a job that names no model runs with
// under cfg, "" when cfg names none (an empty spec is then refused).
func DefaultSpec(cfg config.Model) string {
	provider, name, err := resolve("", cfg)
	if err != nil {
		return ""
	}
	return provider + ":" + name
}
