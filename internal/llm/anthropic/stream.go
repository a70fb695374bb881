package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/ssestream"

	"github.com/agentbox/agentbox/internal/llm"
)

type eventStream = ssestream.Stream[anthropic.MessageStreamEventUnion]

// events turns the SDK's stream into llm events: text deltas as they
// arrive, each tool call when its block stops, then the whole message
// accumulated by the SDK.
func (m *Model) events(ctx context.Context, stream *eventStream) iter.Seq2[llm.Event, error] {
	return func(yield func(llm.Event, error) bool) {
		defer stream.Close()
		var msg anthropic.Message
		stopped := false
		for stream.Next() {
			ev := stream.Current()
			if err := msg.Accumulate(ev); err != nil {
				yield(llm.Event{}, fmt.Errorf("anthropic: %w: malformed stream: %w", llm.ErrUnavailable, err))
				return
			}
			if out, ok := translate(ev, &msg); ok && !yield(out, nil) {
				return
			}
			stopped = stopped || ev.Type == "message_stop"
		}
		if err := stream.Err(); err != nil {
			yield(llm.Event{}, m.wrap(ctx, err))
			return
		}
		if !stopped {
			yield(llm.Event{}, fmt.Errorf("anthropic: %w: stream ended before message_stop", llm.ErrUnavailable))
			return
		}
		resp := response(msg)
		yield(llm.Event{Type: llm.EventDone, Done: &resp}, nil)
	}
}

// translate returns the llm event ev stands for, if any. msg has already
// accumulated ev, so a stopped block is complete.
func translate(ev anthropic.MessageStreamEventUnion, msg *anthropic.Message) (llm.Event, bool) {
	switch ev.Type {
	case "content_block_delta":
		if ev.Delta.Type == "text_delta" && ev.Delta.Text != "" {
			return llm.Event{Type: llm.EventText, Text: ev.Delta.Text}, true
		}
	case "content_block_stop":
		if b := msg.Content[ev.Index]; b.Type == "tool_use" {
			call := toolUse(b)
			return llm.Event{Type: llm.EventToolUse, ToolUse: &call}, true
		}
	}
	return llm.Event{}, false
}

// response converts a whole message: its text and tool calls (thinking and
// server-tool blocks are not part of the contract) and its usage.
func response(msg anthropic.Message) llm.Response {
	out := llm.Message{Role: llm.RoleAssistant}
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			if b.Text != "" {
				out.Content = append(out.Content, llm.Block{Type: llm.BlockText, Text: b.Text})
			}
		case "tool_use":
			out.Content = append(out.Content, toolUse(b))
		}
	}
	u := msg.Usage
	return llm.Response{
		Message:    out,
		StopReason: string(msg.StopReason),
		Usage: llm.Usage{
			InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens,
		},
	}
}

// toolUse converts a tool call. Its input is always valid JSON: a call cut
// off by max_tokens arrives with {} (the SDK's accumulator does that too).
func toolUse(b anthropic.ContentBlockUnion) llm.Block {
	input := json.RawMessage(bytes.Clone(b.Input))
	if len(input) == 0 || !json.Valid(input) {
		input = json.RawMessage(`{}`)
	}
	return llm.Block{Type: llm.BlockToolUse, ID: b.ID, Name: b.Name, Input: input}
}
