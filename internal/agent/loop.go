// Package agent is the loop that does a job: the model is sent the system
// prompt, the task and the conversation so far; the tool calls it answers
// with run in the job's sandbox; their results go back; and so on until it
// calls finish or a limit stops it. Every model message, tool call and tool
// result is emitted as an event as it happens.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentbox/agentbox/internal/agent/tools"
	"github.com/agentbox/agentbox/internal/llm"
)

// Event types the loop emits.
const (
	EventModel      = "model"       // {"step", "message", "stop_reason", "usage", "duration_ms"}
	EventToolCall   = "tool_call"   // {"step", "id", "name", "input"}
	EventToolResult = "tool_result" // {"step", "id", "name", "is_error", "text", "images", "duration_ms"}
	EventNotice     = "notice"      // {"step", "text"}: what the loop told the model on its own
)

// Loop is one conversation with a model over a sandbox's tools.
type Loop struct {
	Model  llm.Model
	Tools  []tools.Tool
	Env    *tools.Env
	System string
	// Emit records an event; it must not fail the loop.
	Emit func(typ string, payload any)
	// OnText, if set, sees the model's text as it streams.
	OnText func(delta string)
	// RepeatLimit: a failing call repeated this many times in a row makes
	// the loop tell the model to change approach (default 3).
	RepeatLimit int

	Messages []llm.Message
	Usage    llm.Usage
	Steps    int
	// LastInput is the input token count of the latest call: the context size.
	LastInput int64
	// ModelTime and ToolTime add up the time spent waiting for the model and
	// in tools; the rest of a step is the loop's own overhead.
	ModelTime, ToolTime time.Duration
	repeats             repeatTracker
}

// StepResult is what one step did.
type StepResult struct {
	ToolCalls int
	Finish    *tools.Finish
	Text      string
	Stop      string
}

// Step sends the conversation to the model and runs the tool calls it
// answers with. An error means the model or the sandbox failed.
func (l *Loop) Step(ctx context.Context) (StepResult, error) {
	l.Steps++
	resp, err := l.callModel(ctx)
	if err != nil {
		return StepResult{}, err
	}
	l.Messages = append(l.Messages, resp.Message)
	res := StepResult{Text: resp.Message.PlainText(), Stop: resp.StopReason}
	calls := resp.Message.ToolUses()
	res.ToolCalls = len(calls)
	if len(calls) == 0 {
		return res, nil
	}
	results, finish, err := l.runTools(ctx, calls)
	if err != nil {
		return res, err
	}
	l.Messages = append(l.Messages, llm.Message{Role: llm.RoleUser, Content: results})
	res.Finish = finish
	return res, nil
}

// Say adds a user message to the conversation.
func (l *Loop) Say(text string) {
	l.Messages = append(l.Messages, llm.Text(llm.RoleUser, text))
}

func (l *Loop) callModel(ctx context.Context) (llm.Response, error) {
	begin := time.Now()
	seq, err := l.Model.Stream(ctx, llm.Request{System: l.System, Messages: l.Messages, Tools: tools.Specs(l.Tools)})
	if err != nil {
		return llm.Response{}, fmt.Errorf("model: %w", err)
	}
	resp, err := llm.Collect(seq, func(ev llm.Event) {
		if ev.Type == llm.EventText && l.OnText != nil {
			l.OnText(ev.Text)
		}
	})
	l.ModelTime += time.Since(begin)
	if err != nil {
		return llm.Response{}, fmt.Errorf("model: %w", err)
	}
	l.Usage = l.Usage.Add(resp.Usage)
	l.LastInput = resp.Usage.InputTokens + resp.Usage.CacheReadTokens + resp.Usage.CacheWriteTokens
	l.Emit(EventModel, map[string]any{"step": l.Steps, "message": resp.Message, "stop_reason": resp.StopReason,
		"usage": resp.Usage, "duration_ms": time.Since(begin).Milliseconds()})
	return resp, nil
}

// runTools runs each call in order and returns the tool_result blocks.
func (l *Loop) runTools(ctx context.Context, calls []llm.Block) ([]llm.Block, *tools.Finish, error) {
	var out []llm.Block
	var finish *tools.Finish
	for _, c := range calls {
		l.Emit(EventToolCall, map[string]any{"step": l.Steps, "id": c.ID, "name": c.Name, "input": json.RawMessage(orEmpty(c.Input))})
		begin := time.Now()
		res, err := l.runTool(ctx, c)
		l.ToolTime += time.Since(begin)
		if err != nil {
			return nil, nil, err
		}
		if note := l.repeats.observe(c, res.IsError, l.repeatLimit()); note != "" {
			res.Text += "\n\n" + note
			l.Emit(EventNotice, map[string]any{"step": l.Steps, "text": note})
		}
		l.Emit(EventToolResult, map[string]any{"step": l.Steps, "id": c.ID, "name": c.Name, "is_error": res.IsError,
			"text": res.Text, "images": len(res.Images), "duration_ms": time.Since(begin).Milliseconds()})
		out = append(out, llm.Block{Type: llm.BlockToolResult, ID: c.ID, Text: res.Text, IsError: res.IsError, Images: res.Images})
		if res.Finish != nil && finish == nil {
			finish = res.Finish
		}
	}
	return out, finish, nil
}

// runTool runs one call; an unknown tool or bad input is the model's
// mistake, shown to it as an error result.
func (l *Loop) runTool(ctx context.Context, c llm.Block) (tools.Result, error) {
	res, err := tools.Call(ctx, l.Env, l.Tools, c.Name, orEmpty(c.Input))
	if err != nil {
		return tools.Result{}, fmt.Errorf("tool %s: %w", c.Name, err)
	}
	return res, nil
}

func (l *Loop) repeatLimit() int {
	if l.RepeatLimit > 0 {
		return l.RepeatLimit
	}
	return 3
}

func orEmpty(in json.RawMessage) json.RawMessage {
	if len(in) == 0 {
		return json.RawMessage("{}")
	}
	return in
}

// IsModelError reports whether err came from the model provider (as
// opposed to the sandbox or a cancel).
func IsModelError(err error) bool {
	for _, e := range []error{llm.ErrAuth, llm.ErrNotConfigured, llm.ErrUnknownModel, llm.ErrRateLimited, llm.ErrUnavailable, llm.ErrBadRequest} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
