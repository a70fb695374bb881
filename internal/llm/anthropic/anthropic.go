// Package anthropic is the llm.Model of Anthropic's Messages API, built on
// the official SDK (github.com/anthropics/anthropic-sdk-go): streaming, tool
// calling, images in tool results, prompt caching, usage including cache
// tokens, and native computer use (a tool with an llm.NativeTool of kind
// computer goes as computer_20250124, with its anthropic-beta header). The
// SDK retries 408/409/429/5xx/529 with backoff honouring Retry-After; what
// is left after the retries is mapped onto the llm sentinels.
//
// Nothing here reads the environment: the key and base URL come in Config
// (from internal/config), so the SDK's own environment defaults are off.
package anthropic

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentbox/agentbox/internal/llm"
)

// Defaults for a model the caller says nothing about.
const (
	DefaultMaxRetries    = 4
	DefaultContextWindow = 200_000
	DefaultMaxOutput     = 8_192
	// wholeTimeout bounds one attempt of a non-streamed call.
	wholeTimeout = 10 * time.Minute
	// headerTimeout bounds the wait for response headers.
	headerTimeout = 10 * time.Minute
)

// Config says which model to use and how to reach it.
type Config = llm.ClientConfig

// Model talks to one Anthropic model.
type Model struct {
	cfg  Config
	info llm.ModelInfo
	msgs anthropic.MessageService
}

var _ llm.Model = (*Model)(nil)

// New returns a client of the model cfg names. A missing key is
// llm.ErrNotConfigured, naming the variable to set.
func New(cfg Config) (*Model, error) {
	if cfg.Name == "" {
		return nil, fmt.Errorf("anthropic: %w: no model name: set AGENTBOX_MODEL=anthropic:NAME", llm.ErrNotConfigured)
	}
	if cfg.APIKey == "" && cfg.BaseURL == "" {
		return nil, fmt.Errorf("anthropic: %w: no API key: export ANTHROPIC_API_KEY=…", llm.ErrNotConfigured)
	}
	client := anthropic.NewClient(clientOptions(cfg)...)
	return &Model{cfg: cfg, info: info(cfg), msgs: client.Messages}, nil
}

func clientOptions(cfg Config) []option.RequestOption {
	opts := []option.RequestOption{option.WithoutEnvironmentDefaults(), option.WithMaxRetries(cfg.Retries(DefaultMaxRetries))}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	return append(opts, option.WithHTTPClient(cfg.Client(headerTimeout)))
}

func info(cfg Config) llm.ModelInfo {
	i := cfg.Info("anthropic", DefaultContextWindow, DefaultMaxOutput)
	i.NativeComputerUse = true
	return i
}

// Info describes the model.
func (m *Model) Info() llm.ModelInfo { return m.info }

// Stream sends req. Failures before the response starts (a refused key, an
// unknown model, retries exhausted) are returned at once; later ones, such
// as an overloaded_error event mid-stream, through the iterator. The
// iterator can be ranged over once and must be, to release the connection.
func (m *Model) Stream(ctx context.Context, req llm.Request) (iter.Seq2[llm.Event, error], error) {
	params, err := m.params(req)
	if err != nil {
		return nil, err
	}
	opts := m.requestOptions(req)
	if m.cfg.NoStream {
		return m.whole(ctx, params, opts)
	}
	stream := m.msgs.NewStreaming(ctx, params, opts...)
	if err := stream.Err(); err != nil {
		_ = stream.Close()
		return nil, m.wrap(ctx, err)
	}
	return m.events(ctx, stream), nil
}

// requestOptions are the options of one request: the anthropic-beta
// header, one comma-separated value, when its tools need betas.
func (m *Model) requestOptions(req llm.Request) []option.RequestOption {
	if b := betas(req.Tools, m.info.NativeComputerUse); len(b) > 0 {
		return []option.RequestOption{option.WithHeader("anthropic-beta", strings.Join(b, ","))}
	}
	return nil
}

// whole makes a non-streamed call and replays its answer as events.
func (m *Model) whole(ctx context.Context, params anthropic.MessageNewParams, opts []option.RequestOption) (iter.Seq2[llm.Event, error], error) {
	msg, err := m.msgs.New(ctx, params, append(opts, option.WithRequestTimeout(wholeTimeout))...)
	if err != nil {
		return nil, m.wrap(ctx, err)
	}
	return llm.Replay(response(*msg)), nil
}
