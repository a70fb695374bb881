package llm

import (
	"net/http"
	"time"
)

// ClientConfig says which model to use and how to reach it. Both providers
// take it: anthropic.Config and openai.Config are this type.
type ClientConfig struct {
	// Name is the model as the provider knows it: claude-sonnet-4-5,
	// gpt-4.1, llama3.1, ...
	Name string
	// APIKey is required unless BaseURL points at a server that needs none
	// (a gateway, Ollama and most local servers).
	APIKey string
	// BaseURL replaces the provider's: https://api.anthropic.com (without
	// /v1) for Anthropic, https://api.openai.com/v1 (ending in /v1) for
	// OpenAI-compatible servers.
	BaseURL string
	// MaxRetries is how often a transient failure is retried: 0 means the
	// provider's default, a negative number none.
	MaxRetries int
	// HTTPClient replaces the default client (optional).
	HTTPClient *http.Client
	// NoStream asks for whole responses instead of streams; the iterator
	// then yields everything at once. For gateways that cannot stream.
	NoStream bool

	// Price, ContextWindow and MaxOutput describe the model (zero values:
	// no price, the provider's default window and output).
	Price         Price
	ContextWindow int
	MaxOutput     int
}

// Retries is MaxRetries resolved against the provider's default.
func (c ClientConfig) Retries(def int) int {
	switch {
	case c.MaxRetries == 0:
		return def
	case c.MaxRetries < 0:
		return 0
	}
	return c.MaxRetries
}

// Client is the configured HTTP client, or one that bounds the wait for
// response headers, so that a server that accepts a connection and never
// answers fails (and is retried) instead of hanging; the body, a stream that
// may run long, is not bounded.
func (c ClientConfig) Client(headerTimeout time.Duration) *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t = t.Clone()
		t.ResponseHeaderTimeout = headerTimeout
		return &http.Client{Transport: t}
	}
	return &http.Client{Transport: http.DefaultTransport}
}

// Info describes the configured model of provider, with its default window
// and output for zero values.
func (c ClientConfig) Info(provider string, window, output int) ModelInfo {
	i := ModelInfo{Provider: provider, Name: c.Name, Price: c.Price, ContextWindow: c.ContextWindow, MaxOutputTokens: c.MaxOutput}
	if i.ContextWindow <= 0 {
		i.ContextWindow = window
	}
	if i.MaxOutputTokens <= 0 {
		i.MaxOutputTokens = output
	}
	return i
}
