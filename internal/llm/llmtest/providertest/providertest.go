// Package providertest is the conformance suite of llm.Model: every provider
// client (llm/anthropic, llm/openai) runs Run from its own tests against the
// llmtest server, and so keeps the rules of the llm package's contract:
// streamed and whole answers, tool calls and results, native tools (sent
// natively or as functions, as the model's info says), usage and cost, output
// limits, retries, errors mapped onto the llm sentinels, and cancellation.
// What only one wire format has (prompt caching, tool messages, the shapes
// of error bodies) stays in that provider's tests.
package providertest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

// FastRetry is a Retry-After short enough to keep the tests quick.
const FastRetry = 5 * time.Millisecond

// Options are what the suite varies between the clients it opens. Their
// zero values ask for the provider's defaults, as in its Config.
type Options struct {
	// NoStream asks for whole responses instead of streams.
	NoStream bool
	// MaxRetries: 0 is the default, a negative number none.
	MaxRetries int
	// MaxOutput is the model's output limit (0: the default).
	MaxOutput int
	// Price is the model's price.
	Price llm.Price
}

// Opener returns a client of the provider's test model that talks to s in
// the provider's wire format, configured by o.
type Opener func(t *testing.T, s *llmtest.Server, o Options) llm.Model

// Provider describes one implementation to the suite.
type Provider struct {
	Open Opener
	// Info is what a client opened with zero Options says of itself; its
	// Name and MaxOutputTokens are also what the server must receive.
	Info llm.ModelInfo
	// APIKey is the key the client sends.
	APIKey string
	// ToolIDPrefix starts the ID of every tool call (the server makes
	// them in the style of the format: toolu_, call_).
	ToolIDPrefix string
	// ImagesApart says the images of a tool result reach the server after
	// the results, as an image block of the same message (Chat
	// Completions carries them in a user message of their own), not in
	// the result itself.
	ImagesApart bool
	// LongRetryAfter is a Retry-After the client waits for but a test
	// must not: the suite cancels the wait.
	LongRetryAfter time.Duration
	// Errors are the HTTP failures and what the client makes of them,
	// run with two retries.
	Errors []ErrorCase
	// MidStreamErrors are the error events of a stream that started fine.
	MidStreamErrors []MidStreamCase
}

// ErrorCase is an HTTP failure the client must report at once.
type ErrorCase struct {
	Name string
	// Turn is the failure; a Repeat one answers every retry too.
	Turn   llmtest.Turn
	Repeat bool
	// Want is the llm sentinel the error wraps; its text mentions Mention.
	Want    error
	Mention string
	// Requests is how many requests the server sees, retries included.
	Requests int
}

// MidStreamCase is an error event of ErrorType after some text, which
// the iterator reports as an error wrapping Want.
type MidStreamCase struct {
	ErrorType string
	Want      error
}

// modes are the two ways a client talks to the API.
var modes = []struct {
	name     string
	noStream bool
}{{"stream", false}, {"whole", true}}

// Run runs the suite against p, each test in its own t.Run with a fresh
// server.
func Run(t *testing.T, p Provider) {
	tests := []struct {
		name string
		fn   func(*testing.T, Provider)
	}{
		{"Text", testText},
		{"ToolCalls", testToolCalls},
		{"ToolResultRoundTrip", testToolResultRoundTrip},
		{"ComputerTool", testComputerTool},
		{"UsageAndCost", testUsageAndCost},
		{"MaxTokens", testMaxTokens},
		{"Info", testInfo},
		{"RetryAfterHonoured", testRetryAfterHonoured},
		{"RetryOverloadedAndUnavailable", testRetryOverloadedAndUnavailable},
		{"Errors", testErrors},
		{"MidStreamError", testMidStreamError},
		{"CancelMidStream", testCancelMidStream},
		{"CancelBeforeRetry", testCancelBeforeRetry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, p) })
	}
}

// eachMode runs fn as a subtest once streaming and once not.
func eachMode(t *testing.T, fn func(t *testing.T, noStream bool)) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) { fn(t, mode.noStream) })
	}
}

// Collect streams req from m and collects its events and response, failing
// the test on any error.
func Collect(t *testing.T, m llm.Model, req llm.Request) ([]llm.Event, llm.Response) {
	t.Helper()
	seq, err := m.Stream(context.Background(), req)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	var events []llm.Event
	resp, err := llm.Collect(seq, func(ev llm.Event) { events = append(events, ev) })
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	return events, resp
}

// StreamErr is the error m's Stream returns at once for Ask("hi"); it fails
// the test if the error comes through the iterator instead.
func StreamErr(t *testing.T, m llm.Model) error {
	t.Helper()
	seq, err := m.Stream(context.Background(), Ask("hi"))
	if err == nil {
		_, err = llm.Collect(seq, nil)
		t.Errorf("Stream did not fail at once (the iterator said %v)", err)
	}
	return err
}

// Ask returns a request of a system prompt, text from the user and two
// tools, bash and finish.
func Ask(text string) llm.Request {
	return llm.Request{
		System:   "You are a test.",
		Messages: []llm.Message{llm.Text(llm.RoleUser, text)},
		Tools: []llm.Tool{
			{Name: "bash", Description: "Run a command.", InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)},
			{Name: "finish", Description: "Finish.", InputSchema: json.RawMessage(`{"type":"object","properties":{"summary":{"type":"string"}},"additionalProperties":false}`)},
		},
	}
}
