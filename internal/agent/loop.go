// Package agent is the loop that does a job: the model is sent the system
// prompt, the task and the conversation so far; the tool calls it answers
// with run in the job's sandbox; their results go back; and so on until it
// calls finish or a limit stops it. Every model message, tool call and tool
// result is emitted as an event as it happens.
package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/agent/tools"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/memory"
)

// Loop is one conversation with a model over a sandbox's tools.
type Loop struct {
	Model  llm.Model
	Tools  []tools.Tool
	Env    *tools.Env
	System string
	// Emit records an event (event.Model, event.ToolCall, ...); it must not
	// fail the loop.
	Emit func(event.Payload)
	// Media, if set, keeps the images of tool results for the job's
	// timeline.
	Media ImageKeeper
	// Output, if set, watches one call's commands: it returns where their
	// output goes as it is produced (tools.Env.Output) and a function,
	// run when the call has ended and before its result is emitted, that
	// flushes what is still held.
	Output func(call string) (write func(stream string, p []byte), flush func())
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
	// Memory, if set, fits each prompt into the model's context window;
	// MemState is its condensation state. Recall, if set, indexes every
	// step for the recall tool.
	Memory   *memory.Manager
	MemState memory.State
	// MaxOutput bounds each answer's tokens (0: the model's default).
	MaxOutput int
	Recall    *memory.Index
	// Seen is the seq of the last event of the job's log read for the
	// user's messages (0 outside a job); each model event records it.
	Seen    int64
	repeats repeatTracker
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
	results, finish, err := l.runTools(ctx, calls, resp.StopReason == "max_tokens")
	l.Messages = append(l.Messages, llm.Message{Role: llm.RoleUser, Content: results})
	res.Finish = finish
	return res, err
}

// Say adds a user message to the conversation.
func (l *Loop) Say(text string) {
	l.Messages = append(l.Messages, llm.Text(llm.RoleUser, text))
}

// Retries of a model call that failed transiently after the SDK's own
// retries (which do not cover errors in the middle of a stream).
var (
	modelRetries = 4
	retryDelay   = 2 * time.Second
	// streamIdle is how long a stream may go without an event.
	streamIdle = 3 * time.Minute
)

var errStalled = fmt.Errorf("%w: the stream stalled", llm.ErrUnavailable)

// callModel asks the model, retrying transient failures with backoff.
func (l *Loop) callModel(ctx context.Context) (llm.Response, error) {
	begin := time.Now()
	defer func() { l.ModelTime += time.Since(begin) }()
	delay := retryDelay
	for try := 0; ; try++ {
		resp, err := l.callOnce(ctx)
		if err == nil {
			return l.account(resp, begin), nil
		}
		transient := errors.Is(err, llm.ErrUnavailable) || errors.Is(err, llm.ErrRateLimited)
		if !transient || try >= modelRetries || ctx.Err() != nil {
			return llm.Response{}, fmt.Errorf("model: %w", err)
		}
		l.Emit(event.Notice{Step: l.Steps, Text: fmt.Sprintf("model call failed (%v); retrying in %v", err, delay)})
		select {
		case <-ctx.Done():
			return llm.Response{}, fmt.Errorf("model: %w", context.Cause(ctx))
		case <-time.After(delay):
		}
		delay *= 2
	}
}

// callOnce streams one response; a stream silent for streamIdle is cut.
func (l *Loop) callOnce(ctx context.Context) (llm.Response, error) {
	msgs, err := l.prompt(ctx) // may call the summarizer: not under the stream's idle timer
	if err != nil {
		return llm.Response{}, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(streamIdle, func() { cancel(errStalled) })
	defer idle.Stop()
	req := llm.Request{System: l.System, Messages: msgs, Tools: tools.Specs(l.Tools), MaxTokens: l.MaxOutput}
	seq, err := l.Model.Stream(ctx, req)
	if err != nil {
		return llm.Response{}, err
	}
	resp, err := llm.Collect(seq, func(ev llm.Event) {
		idle.Reset(streamIdle)
		if ev.Type == llm.EventText && l.OnText != nil {
			l.OnText(ev.Text)
		}
	})
	if err != nil && errors.Is(context.Cause(ctx), errStalled) {
		return llm.Response{}, errStalled
	}
	if err == nil {
		l.calibrate(req, resp.Usage)
	}
	return resp, err
}

// account records a response's usage and emits it.
func (l *Loop) account(resp llm.Response, begin time.Time) llm.Response {
	l.Usage = l.Usage.Add(resp.Usage)
	l.LastInput = resp.Usage.InputTokens + resp.Usage.CacheReadTokens + resp.Usage.CacheWriteTokens
	var sb strings.Builder
	renderMessage(&sb, resp.Message)
	l.index("model", sb.String())
	l.Emit(event.Model{Step: l.Steps, Message: resp.Message, StopReason: resp.StopReason, Seen: l.Seen,
		Usage: resp.Usage, DurationMS: time.Since(begin).Milliseconds()})
	return resp
}

// runTools runs each call in order and returns the tool_result blocks, one
// per call even when it fails partway (then with the error), so the
// conversation and the event log never hold a call without its result.
func (l *Loop) runTools(ctx context.Context, calls []llm.Block, cutOff bool) ([]llm.Block, *tools.Finish, error) {
	out := make([]llm.Block, 0, len(calls))
	var finish *tools.Finish
	var failure error
	failed := "" // failure in words for the model
	for i, c := range calls {
		l.Emit(event.ToolCall{Step: l.Steps, ID: c.ID, Name: c.Name, Input: orEmpty(c.Input)})
		begin := time.Now()
		res, err := l.result(ctx, c, skipReason(failed, finish, cutOff && i == len(calls)-1))
		l.ToolTime += time.Since(begin)
		if err != nil {
			failure, res = err, notCompleted(ctx, res, err)
			failed = cmp.Or(tools.StopReason(ctx), err.Error())
		}
		if note := l.repeats.observe(c, res, l.repeatLimit()); note != "" {
			res.Text += "\n\n" + note
			l.Emit(event.Notice{Step: l.Steps, Text: note})
		}
		if c.Name != "recall" {
			l.index("tool_result "+c.Name, res.Text)
		}
		l.Emit(event.ToolResult{Step: l.Steps, ID: c.ID, Name: c.Name, IsError: res.IsError,
			Text: res.Text, Images: len(res.Images), Media: l.keepImages(res.Images), DurationMS: time.Since(begin).Milliseconds()})
		out = append(out, llm.Block{Type: llm.BlockToolResult, ID: c.ID, Text: res.Text, IsError: res.IsError, Images: res.Images})
		if res.Finish != nil && finish == nil {
			finish = res.Finish
		}
	}
	return out, finish, failure
}

// notCompleted is the result of a call that failed with err: what the
// tool kept of a step cut by ctx's end (a command's output so far) with
// why in one plain line ("not completed: canceled", "... job timed out
// after 5s"), never the transport's words; or the error of a broken
// sandbox.
func notCompleted(ctx context.Context, res tools.Result, err error) tools.Result {
	if ctx.Err() == nil {
		return tools.Result{IsError: true, Text: "not completed: " + err.Error()}
	}
	if res.Text == "" {
		res.Text = "not completed: " + tools.StopReason(ctx)
	}
	res.IsError = true
	return res
}

// ImageKeeper keeps the images of tool results, as the job's Run
// (*jobs.Run) does; KeepImage returns the name an image is kept under, or
// "" when it is not kept.
type ImageKeeper interface {
	KeepImage(step int, data []byte) string
}

// keepImages keeps a result's images and returns the names of those kept.
func (l *Loop) keepImages(imgs []llm.Image) []string {
	if l.Media == nil {
		return nil
	}
	var names []string
	for _, img := range imgs {
		if name := l.Media.KeepImage(l.Steps, img.Data); name != "" {
			names = append(names, name)
		}
	}
	return names
}

// skipReason says why a call is not run, or "" to run it.
func skipReason(failure string, finish *tools.Finish, cutOff bool) string {
	switch {
	case failure != "":
		return "not run: an earlier call in this step failed: " + failure
	case finish != nil:
		return "not run: finish was already called"
	case cutOff:
		return "not run: your answer hit the output token limit in the middle of this call, so its input is incomplete; " +
			"send less per call (for example, write a large file in several smaller parts)"
	}
	return ""
}

// result runs a call, or reports why it was skipped.
func (l *Loop) result(ctx context.Context, c llm.Block, skip string) (tools.Result, error) {
	if skip != "" {
		return tools.Result{IsError: true, Text: skip}, nil
	}
	return l.runTool(ctx, c)
}

// runTool runs one call; an unknown tool or bad input is the model's
// mistake, shown to it as an error result.
func (l *Loop) runTool(ctx context.Context, c llm.Block) (tools.Result, error) {
	env := l.Env
	if l.Output != nil && env != nil {
		write, flush := l.Output(c.ID)
		defer flush()
		e := *env
		e.Output = write
		env = &e
	}
	return tools.Call(ctx, env, l.Tools, c.Name, orEmpty(c.Input))
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
