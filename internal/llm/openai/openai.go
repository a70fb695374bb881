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
type Config = llm.ClientConfig

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
	opts := []option.RequestOption{option.WithEnvironmentProduction(), option.WithMaxRetries(cfg.Retries(DefaultMaxRetries))}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	return append(opts, option.WithHTTPClient(cfg.Client(headerTimeout)))
}

func info(cfg Config) llm.ModelInfo {
	return cfg.Info("openai", DefaultContextWindow, DefaultMaxOutput)
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
