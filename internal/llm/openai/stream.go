package openai

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"iter"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/agentbox/agentbox/internal/llm"
)

type chunkStream = ssestream.Stream[openai.ChatCompletionChunk]

// events turns the SDK's stream into llm events: text deltas as they
// arrive; the tool calls, complete only once the choice finishes, at the
// end, before the whole message.
func (m *Model) events(ctx context.Context, stream *chunkStream) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		defer stream.Close()
		var acc accumulator
		for stream.Next() {
			if text := acc.add(stream.Current()); text != "" {
				if !yield(llm.Event{Type: llm.EventText, Text: text}, nil) {
					return
				}
			}
		}
		if err := stream.Err(); err != nil {
			yield(llm.Event{}, m.wrap(ctx, err, nil))
			return
		}
		if acc.finish == "" {
			yield(llm.Event{}, fmt.Errorf("openai: %w: stream ended without a finish_reason", llm.ErrUnavailable))
			return
		}
		resp := acc.response()
		for _, call := range resp.Message.ToolUses() {
			if !yield(llm.Event{Type: llm.EventToolUse, ToolUse: &call}, nil) {
				return
			}
		}
		yield(llm.Event{Type: llm.EventDone, Done: &resp}, nil)
	}
}

// accumulator gathers a streamed choice: text, tool calls whose pieces
// share an index, the finish reason and the usage chunk.
type accumulator struct {
	text    strings.Builder
	calls   []*partialCall
	byIndex map[int64]int
	finish  string
	usage   openai.CompletionUsage
}

type partialCall struct {
	id, name string
	args     strings.Builder
}

// add takes one chunk and returns its text delta.
func (a *accumulator) add(c openai.ChatCompletionChunk) string {
	if c.JSON.Usage.Valid() {
		a.usage = c.Usage
	}
	if len(c.Choices) == 0 {
		return ""
	}
	ch := c.Choices[0]
	for _, tc := range ch.Delta.ToolCalls {
		a.toolDelta(tc.Index, tc.ID, tc.Function.Name, tc.Function.Arguments)
	}
	if ch.FinishReason != "" {
		a.finish = ch.FinishReason
	}
	a.text.WriteString(ch.Delta.Content)
	return ch.Delta.Content
}

// toolDelta adds a piece of the call at index. A new ID at a known index
// starts a new call: some servers send every call with index 0.
func (a *accumulator) toolDelta(index int64, id, name, args string) {
	if a.byIndex == nil {
		a.byIndex = map[int64]int{}
	}
	pos, ok := a.byIndex[index]
	if !ok || (id != "" && a.calls[pos].id != "" && id != a.calls[pos].id) {
		a.calls = append(a.calls, &partialCall{})
		pos = len(a.calls) - 1
		a.byIndex[index] = pos
	}
	p := a.calls[pos]
	if p.id == "" {
		p.id = id
	}
	if p.name == "" {
		p.name = name
	}
	p.args.WriteString(args)
}

// response is the accumulated message.
func (a *accumulator) response() llm.Response {
	msg := llm.Message{Role: llm.RoleAssistant}
	if text := a.text.String(); text != "" {
		msg.Content = append(msg.Content, llm.Block{Type: llm.BlockText, Text: text})
	}
	for _, c := range a.calls {
		id := c.id
		if id == "" {
			id = newCallID()
		}
		msg.Content = append(msg.Content, llm.Block{Type: llm.BlockToolUse, ID: id, Name: c.name, Input: toolArgs(c.args.String())})
	}
	return llm.Response{Message: msg, StopReason: stopReason(a.finish, len(a.calls) > 0), Usage: usage(a.usage)}
}

// fromCompletion converts a non-streamed answer.
func fromCompletion(c *openai.ChatCompletion) (llm.Response, error) {
	if len(c.Choices) == 0 {
		return llm.Response{}, fmt.Errorf("openai: %w: the answer has no choices", llm.ErrUnavailable)
	}
	ch := c.Choices[0]
	acc := accumulator{finish: ch.FinishReason, usage: c.Usage}
	acc.text.WriteString(ch.Message.Content)
	for i, tc := range ch.Message.ToolCalls {
		acc.toolDelta(int64(i), tc.ID, tc.Function.Name, tc.Function.Arguments)
	}
	return acc.response(), nil
}

// toolArgs makes a call's arguments a valid JSON value: {} when empty, and
// a JSON string holding them when a model wrote something else, which the
// tool then reports back as bad input.
func toolArgs(s string) json.RawMessage {
	if strings.TrimSpace(s) == "" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	data, _ := json.Marshal(s)
	return data
}

// stopReason maps finish_reason onto the contract's words. Some servers
// (older Ollama) say stop even when the model called tools.
func stopReason(finish string, calls bool) string {
	switch {
	case finish == "length":
		return "max_tokens"
	case calls || finish == "tool_calls" || finish == "function_call":
		return "tool_use"
	case finish == "stop" || finish == "":
		return "end_turn"
	}
	return finish
}

// usage converts the counts. prompt_tokens includes cached tokens; the
// contract counts them apart so that each is priced at its own rate.
func usage(u openai.CompletionUsage) llm.Usage {
	read := u.PromptTokensDetails.CachedTokens
	write := u.PromptTokensDetails.CacheWriteTokens
	return llm.Usage{
		InputTokens:      max(0, u.PromptTokens-read-write),
		OutputTokens:     u.CompletionTokens,
		CacheReadTokens:  read,
		CacheWriteTokens: write,
	}
}

// newCallID names a call the server left unnamed.
func newCallID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "call_" + hex.EncodeToString(b)
}
