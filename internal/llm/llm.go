// Package llm is the contract between the agent and language models: a
// Model streams a response to a Request of system prompt, messages and
// tools. Implementations live in subpackages (anthropic/, openai/), built on
// the providers' official SDKs; llmtest/ is a scripted fake server speaking
// both wire formats, the only stand-in the test suite uses.
//
// Rules every implementation follows:
//   - Stream returns an error at once for problems known before the first
//     byte (no key, refused key, unknown model), wrapped around the
//     sentinels below; later failures arrive through the iterator.
//   - Transient failures (429, 5xx, overload) are retried with backoff,
//     honouring Retry-After, before they are reported.
//   - The iterator yields text deltas as they arrive, each tool call once it
//     is complete, and ends with exactly one EventDone.
package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strings"
)

// Errors of every provider; check them with errors.Is.
var (
	// ErrNotConfigured means a key or base URL the provider needs is missing.
	ErrNotConfigured = errors.New("model not configured")
	// ErrAuth means the provider refused the key.
	ErrAuth = errors.New("model provider refused the API key")
	// ErrUnknownModel means the provider does not serve the named model.
	ErrUnknownModel = errors.New("unknown model")
	// ErrRateLimited means requests kept being throttled after the retries.
	ErrRateLimited = errors.New("model provider rate limit")
	// ErrUnavailable means the provider kept failing (5xx, overloaded,
	// unreachable) after the retries.
	ErrUnavailable = errors.New("model provider unavailable")
	// ErrBadRequest means the provider rejected the request itself (for
	// example a prompt longer than the context window).
	ErrBadRequest = errors.New("model provider rejected the request")
)

// Role is who wrote a message.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// BlockType is the kind of a content block.
type BlockType string

const (
	BlockText       BlockType = "text"
	BlockToolUse    BlockType = "tool_use"
	BlockToolResult BlockType = "tool_result"
	BlockImage      BlockType = "image"
)

// Block is one piece of a message's content.
type Block struct {
	Type BlockType `json:"type"`
	// Text is a text block's text, or a tool result's text.
	Text string `json:"text,omitempty"`
	// ID is a tool call's ID; on a tool result, the ID of the call it answers.
	ID string `json:"id,omitempty"`
	// Name and Input are a tool call's tool and JSON arguments. Input is
	// always valid JSON: a model's malformed arguments arrive as a JSON
	// string, for the tool to refuse as bad input.
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// IsError marks a tool result that reports a failure. Wire formats
	// without such a flag (OpenAI) prefix the result's text with "Error: ".
	IsError bool `json:"is_error,omitempty"`
	// Images are an image block's image, or images a tool result carries.
	Images []Image `json:"images,omitempty"`
}

// Image is an image sent to the model.
type Image struct {
	MediaType string `json:"media_type"` // image/png, image/jpeg
	Data      []byte `json:"data"`
}

// Message is one turn of the conversation.
type Message struct {
	Role    Role    `json:"role"`
	Content []Block `json:"content"`
}

// Text returns a user message of plain text.
func Text(role Role, text string) Message {
	return Message{Role: role, Content: []Block{{Type: BlockText, Text: text}}}
}

// ToolUses returns the message's tool calls.
func (m Message) ToolUses() []Block {
	var out []Block
	for _, b := range m.Content {
		if b.Type == BlockToolUse {
			out = append(out, b)
		}
	}
	return out
}

// PlainText joins the message's text blocks.
func (m Message) PlainText() string {
	var sb strings.Builder
	for _, b := range m.Content {
		if b.Type == BlockText {
			sb.WriteString(b.Text)
		}
	}
	return sb.String()
}

// Tool is a function the model may call.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"` // a JSON Schema object
	// Native, when set, says the tool is also one a provider has a type of
	// its own for (Anthropic's computer use). A model whose ModelInfo says
	// it has that type sends it in the native form, under Name; every other
	// model sends the function form, Description and InputSchema, which
	// must then describe the same input.
	Native *NativeTool `json:"native,omitempty"`
}

// NativeKindComputer is the Kind of a native computer-use (desktop) tool.
const NativeKindComputer = "computer"

// NativeTool describes a provider-native tool.
type NativeTool struct {
	// Kind is what the tool is: NativeKindComputer.
	Kind string `json:"kind"`
	// DisplayWidth and DisplayHeight are the screen's size as the model
	// sees it (its screenshots and coordinates), in pixels.
	DisplayWidth  int `json:"display_width,omitempty"`
	DisplayHeight int `json:"display_height,omitempty"`
	// DisplayNumber is the X11 display the screen is (0: not said).
	DisplayNumber int `json:"display_number,omitempty"`
}

// Request is one call to the model.
type Request struct {
	System    string
	Messages  []Message
	Tools     []Tool
	MaxTokens int // 0: the model's default output limit
}

// EventType is the kind of a streamed event.
type EventType string

const (
	EventText    EventType = "text"     // a text delta
	EventToolUse EventType = "tool_use" // a complete tool call
	EventDone    EventType = "done"     // the end, with the whole message
)

// Event is one element of a streamed response.
type Event struct {
	Type    EventType
	Text    string    // EventText
	ToolUse *Block    // EventToolUse
	Done    *Response // EventDone
}

// Response is a complete answer.
type Response struct {
	Message Message
	// StopReason is end_turn, tool_use, max_tokens or the provider's word.
	StopReason string
	Usage      Usage
}

// Usage counts the tokens of one call. InputTokens excludes cache reads and
// writes (the Anthropic meaning; OpenAI clients subtract cached tokens), so
// the prompt's size is InputTokens + CacheReadTokens + CacheWriteTokens.
type Usage struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
}

// Add returns the sum of two usages.
func (u Usage) Add(v Usage) Usage {
	return Usage{u.InputTokens + v.InputTokens, u.OutputTokens + v.OutputTokens,
		u.CacheReadTokens + v.CacheReadTokens, u.CacheWriteTokens + v.CacheWriteTokens}
}

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	InputPerMTok, OutputPerMTok, CacheReadPerMTok, CacheWritePerMTok float64
}

// Cost is the price of u.
func (p Price) Cost(u Usage) float64 {
	return (float64(u.InputTokens)*p.InputPerMTok + float64(u.OutputTokens)*p.OutputPerMTok +
		float64(u.CacheReadTokens)*p.CacheReadPerMTok + float64(u.CacheWriteTokens)*p.CacheWritePerMTok) / 1e6
}

// ModelInfo describes a model.
type ModelInfo struct {
	Provider        string // anthropic, openai
	Name            string
	ContextWindow   int // tokens
	MaxOutputTokens int
	Price           Price
	// NativeComputerUse says the provider has its own computer-use tool type.
	NativeComputerUse bool
}

// Model is a language model.
type Model interface {
	Info() ModelInfo
	Stream(ctx context.Context, req Request) (iter.Seq2[Event, error], error)
}

// Collect drains a stream into its Response, calling onEvent (if not nil)
// for each event on the way.
func Collect(seq iter.Seq2[Event, error], onEvent func(Event)) (Response, error) {
	for ev, err := range seq {
		if err != nil {
			return Response{}, err
		}
		if onEvent != nil {
			onEvent(ev)
		}
		if ev.Type == EventDone && ev.Done != nil {
			return *ev.Done, nil
		}
	}
	return Response{}, fmt.Errorf("%w: stream ended without a final event", ErrUnavailable)
}

// Replay yields a whole response as the events a stream would have: its
// text, each tool call, then the end. For providers asked not to stream.
func Replay(resp Response) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		if text := resp.Message.PlainText(); text != "" {
			if !yield(Event{Type: EventText, Text: text}, nil) {
				return
			}
		}
		for _, call := range resp.Message.ToolUses() {
			if !yield(Event{Type: EventToolUse, ToolUse: &call}, nil) {
				return
			}
		}
		yield(Event{Type: EventDone, Done: &resp}, nil)
	}
}

// ParseSpec splits "provider:name" (e.g. anthropic:claude-sonnet-4-5).
func ParseSpec(spec string) (provider, name string, err error) {
	provider, name, ok := strings.Cut(spec, ":")
	if !ok || name == "" || (provider != "anthropic" && provider != "openai") {
		return "", "", fmt.Errorf("%w: model %q: want anthropic:NAME or openai:NAME", ErrNotConfigured, spec)
	}
	return provider, name, nil
}
