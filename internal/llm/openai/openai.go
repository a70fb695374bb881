// Package openai is the llm.Model of the OpenAI Chat Completions API, built
// on the official SDK (github.com/openai/openai-go), with a configurable base
// URL so that every server speaking the same API works: Ollama
// (http://localhost:11434/v1), vLLM, llama.cpp's server, LM Studio,
// OpenRouter. Streaming asks for a final usage chunk; tool calls are
// accumulated across deltas; tool results are tool messages, and their
// images, which a tool message cannot carry, follow in a user message.
//
// Chat Completions has no is_error on a tool result, so a failed result's
// text starts with ErrorPrefix. Nothing here reads the environment; the
// SDK's client constructor (which does) is not used.
package openai

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentbox/agentbox/internal/llm"
)

// Defaults for a model the caller says nothing about: small, so that an
// unknown local model is not overrun.
const (
	DefaultMaxRetries    = 4
	DefaultContextWindow = 32_768
	DefaultMaxOutput     = 4_096
)

// headerTimeout bounds the wait for response headers (a non-streamed
// answer's headers come when it is complete).
const headerTimeout = 10 * time.Minute

// ErrorPrefix starts the text of a tool result that reports a failure.
const ErrorPrefix = "Error: "

// Config says which model to use and how to reach it.
type Config struct {
	// Name is the model as the server knows it: gpt-4.1, llama3.1, ...
	Name string
	// APIKey is required for OpenAI itself; with a BaseURL it may be
	// empty (Ollama and most local servers need none).
	APIKey string
	// BaseURL replaces https://api.openai.com/v1; it ends in /v1.
	BaseURL string
	// MaxRetries is how often a transient failure is retried: 0 means
	// DefaultMaxRetries, a negative number none.
	MaxRetries int
	// HTTPClient replaces the default client (optional).
	HTTPClient *http.Client
	// NoStream asks for whole responses instead of streams.
	NoStream bool

	// Price, ContextWindow and MaxOutput describe the model (zero values:
	// no price, DefaultContextWindow, DefaultMaxOutput).
	Price         llm.Price
	ContextWindow int
	MaxOutput     int
}

// Model talks to one model of an OpenAI-compatible server.
type Model struct {
	cfg  Config
	info llm.ModelInfo
	chat openai.ChatCompletionService
}

var _ llm.Model = (*Model)(nil)

// New returns a client of the model cfg names. Without a base URL a missing
// key is llm.ErrNotConfigured, naming the variable to set.
func New(cfg Config) (*Model, error) {
	if cfg.Name == "" {
		return nil, fmt.Errorf("openai: %w: no model name: set AGENTBOX_MODEL=openai:NAME", llm.ErrNotConfigured)
	}
	if cfg.APIKey == "" && cfg.BaseURL == "" {
		return nil, fmt.Errorf("openai: %w: no API key: export OPENAI_API_KEY=… (or, for a local server such as Ollama, OPENAI_BASE_URL=http://localhost:11434/v1)", llm.ErrNotConfigured)
	}
	m := &Model{cfg: cfg, info: info(cfg), chat: openai.NewChatCompletionService(clientOptions(cfg)...)}
	return m, nil
}

func clientOptions(cfg Config) []option.RequestOption {
	retries := cfg.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	opts := []option.RequestOption{option.WithEnvironmentProduction(), option.WithMaxRetries(retries)}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	client := cfg.HTTPClient
	if client == nil {
		client = defaultHTTPClient()
	}
	return append(opts, option.WithHTTPClient(client))
}

// defaultHTTPClient bounds the wait for response headers, so that a server
// that accepts a connection and never answers fails (and is retried)
// instead of hanging; the body, a stream that may run long, is not bounded.
func defaultHTTPClient() *http.Client {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t = t.Clone()
		t.ResponseHeaderTimeout = headerTimeout
		return &http.Client{Transport: t}
	}
	return &http.Client{Transport: http.DefaultTransport}
}

func info(cfg Config) llm.ModelInfo {
	i := llm.ModelInfo{
		Provider: "openai", Name: cfg.Name, Price: cfg.Price,
		ContextWindow: cfg.ContextWindow, MaxOutputTokens: cfg.MaxOutput,
	}
	if i.ContextWindow <= 0 {
		i.ContextWindow = DefaultContextWindow
	}
	if i.MaxOutputTokens <= 0 {
		i.MaxOutputTokens = DefaultMaxOutput
	}
	return i
}

// Info describes the model.
func (m *Model) Info() llm.ModelInfo { return m.info }

// Stream sends req. Failures before the response starts are returned at
// once; later ones, such as an error chunk mid-stream, through the
// iterator. The iterator can be ranged over once and must be, to release
// the connection.
func (m *Model) Stream(ctx context.Context, req llm.Request) (iter.Seq2[llm.Event, error], error) {
	params, err := m.params(req)
	if err != nil {
		return nil, err
	}
	var last lastError
	if m.cfg.NoStream {
		c, err := m.chat.New(ctx, params, option.WithMiddleware(last.keep))
		if err != nil {
			return nil, m.wrap(ctx, err, &last)
		}
		resp, err := fromCompletion(c)
		if err != nil {
			return nil, err
		}
		return llm.Replay(resp), nil
	}
	params.StreamOptions.IncludeUsage = openai.Bool(true)
	stream := m.chat.NewStreaming(ctx, params, option.WithMiddleware(last.keep))
	if err := stream.Err(); err != nil {
		_ = stream.Close()
		return nil, m.wrap(ctx, err, &last)
	}
	return m.events(ctx, stream), nil
}
