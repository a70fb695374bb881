package agent

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/agent/tools"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/anthropic"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/store"
)

// fakeTool is a hand-written tool: it counts its calls and answers res/err.
type fakeTool struct {
	name  string
	res   tools.Result
	err   error
	calls atomic.Int32
}

func (f *fakeTool) Spec() llm.Tool {
	return llm.Tool{Name: f.name, Description: f.name, InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)}
}

func (f *fakeTool) Run(context.Context, *tools.Env, json.RawMessage) (tools.Result, error) {
	f.calls.Add(1)
	return f.res, f.err
}

// newLoop is a loop over a scripted model in the Anthropic format, with no
// SDK retries so the loop's own are what is tested.
func newLoop(t *testing.T, script llmtest.Script, ts ...tools.Tool) (*Loop, *llmtest.Server, *[]string) {
	t.Helper()
	fake := llmtest.New(t, script)
	m, err := anthropic.New(anthropic.Config{Name: "claude-sonnet-4-5", APIKey: "k", BaseURL: fake.AnthropicURL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	l := &Loop{Model: m, Tools: append(ts, tools.FinishTool{}), Env: &tools.Env{},
		Emit: func(p event.Payload) { b, _ := json.Marshal(p); events = append(events, p.EventType()+" "+string(b)) }}
	l.Say("the task")
	retryDelay = 10 * time.Millisecond
	return l, fake, &events
}

func one(t llmtest.Turn) llmtest.Step { return llmtest.Step{Branches: []llmtest.Turn{t}} }

func finishTurn() llmtest.Turn { return llmtest.Call("finish", map[string]any{"summary": "done"}) }

func TestMidStreamFailureIsRetried(t *testing.T) {
	l, fake, events := newLoop(t, llmtest.Script{Steps: []llmtest.Step{
		one(llmtest.Turn{Text: "working on it", MidStream: true}),
		one(finishTurn()),
	}})
	res, err := l.Step(context.Background())
	if err != nil || res.Finish == nil {
		t.Fatalf("step: %+v %v", res, err)
	}
	if n := len(fake.Requests()); n != 2 {
		t.Errorf("model asked %d times, want 2", n)
	}
	if !strings.Contains(strings.Join(*events, "\n"), "retrying") {
		t.Errorf("no retry notice in %q", *events)
	}
}

func TestStalledStreamIsRetried(t *testing.T) {
	defer func(d time.Duration) { streamIdle = d }(streamIdle)
	streamIdle = time.Second
	l, fake, _ := newLoop(t, llmtest.Script{Steps: []llmtest.Step{
		one(llmtest.Turn{Text: "hmm", Stall: true}),
		one(finishTurn()),
	}})
	res, err := l.Step(context.Background())
	if err != nil || res.Finish == nil || len(fake.Requests()) != 2 {
		t.Fatalf("step: %+v %v after %d requests", res, err, len(fake.Requests()))
	}
}

func TestRepeatedFailureIsPointedOut(t *testing.T) {
	failing := &fakeTool{name: "check", res: tools.Result{IsError: true, Text: "FAILED: 1 test"}}
	l, fake, _ := newLoop(t, llmtest.Script{Steps: []llmtest.Step{
		{Branches: []llmtest.Turn{llmtest.Call("check", map[string]any{})}, Repeat: true},
	}}, failing)
	for range 4 {
		if _, err := l.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	reqs := fake.Requests()
	last := reqs[len(reqs)-1].Messages
	result := last[len(last)-1].Content[0].Text
	if !strings.Contains(result, "failed 3 times with the same error") {
		t.Errorf("the model was not told; it saw %q", result)
	}
}

func TestCallsAfterFinishAreNotRun(t *testing.T) {
	after := &fakeTool{name: "after", res: tools.Result{Text: "ran"}}
	l, _, _ := newLoop(t, llmtest.Script{Steps: []llmtest.Step{
		one(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: "finish", Input: map[string]any{"summary": "s"}}, {Name: "after", Input: map[string]any{}}}}),
	}}, after)
	res, err := l.Step(context.Background())
	if err != nil || res.Finish == nil || after.calls.Load() != 0 {
		t.Fatalf("finish %v, err %v, later call ran %d times", res.Finish, err, after.calls.Load())
	}
	results := l.Messages[len(l.Messages)-1].Content
	if len(results) != 2 || !strings.Contains(results[1].Text, "finish was already called") {
		t.Errorf("results %+v", results)
	}
}

func TestToolFailureKeepsEveryResult(t *testing.T) {
	ok := &fakeTool{name: "ok", res: tools.Result{Text: "fine"}}
	broken := &fakeTool{name: "broken", err: errors.New("sandbox gone")}
	l, _, events := newLoop(t, llmtest.Script{Steps: []llmtest.Step{
		one(llmtest.Turn{ToolCalls: []llmtest.ToolCall{{Name: "ok", Input: map[string]any{}},
			{Name: "broken", Input: map[string]any{}}, {Name: "ok", Input: map[string]any{}}}}),
	}}, ok, broken)
	if _, err := l.Step(context.Background()); err == nil {
		t.Fatal("a broken sandbox must fail the step")
	}
	results := l.Messages[len(l.Messages)-1].Content
	if len(results) != 3 || results[0].Text != "fine" || !strings.Contains(results[1].Text, "sandbox gone") ||
		!strings.Contains(results[2].Text, "not run") || ok.calls.Load() != 1 {
		t.Errorf("results %+v (ok ran %d times)", results, ok.calls.Load())
	}
	if err := llmtest.CheckPairs(l.Messages); err != nil {
		t.Errorf("history is not sendable: %v", err)
	}
	if n := strings.Count(strings.Join(*events, "\n"), "tool_result "); n != 3 {
		t.Errorf("%d tool_result events, want 3", n)
	}
}

func TestDriveStops(t *testing.T) {
	tests := []struct {
		name  string
		turn  llmtest.Turn
		agent Config
		want  string
	}{
		{"idle model", llmtest.Say("I think it's done."), Config{}, "without using a tool or calling finish"},
		{"token budget", llmtest.Call("noop", map[string]any{}), Config{MaxTokens: 10}, "token budget of 10"},
		{"max steps", llmtest.Call("noop", map[string]any{}), Config{MaxSteps: 3}, "stopped after 3 steps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, _, _ := newLoop(t, llmtest.Script{Steps: []llmtest.Step{{Branches: []llmtest.Turn{tt.turn}, Repeat: true}}},
				&fakeTool{name: "noop", res: tools.Result{Text: "ok"}})
			a := New(tt.agent)
			out, err := a.drive(context.Background(), &jobs.Run{}, l, stepLimits{max: a.cfg.MaxSteps})
			if err != nil || out.Status != store.StatusError || !strings.Contains(out.Error, tt.want) {
				t.Errorf("outcome %+v, %v; want error %q", out, err, tt.want)
			}
		})
	}
}

// TestSmallWindowLeavesOutTheGUITools: a window too small for every tool's
// description drops the desktop, then the notebook tool, instead of
// failing; a large window keeps them; a window too small even for the core
// tools still fails.
func TestSmallWindowLeavesOutTheGUITools(t *testing.T) {
	names := func(l *Loop) []string {
		var out []string
		for _, tl := range l.Tools {
			out = append(out, tl.Spec().Name)
		}
		return out
	}
	for _, tt := range []struct {
		window  int
		present []string
		absent  []string
	}{
		{200_000, []string{tools.NameBash, tools.NamePython, tools.NameComputer, "recall"}, nil},
		{8_000, []string{tools.NameBash, "recall"}, []string{tools.NameComputer}},
	} {
		l, _, _ := newLoop(t, llmtest.Script{})
		l.Tools = append(tools.Default(), l.Tools[len(l.Tools)-1:]...)
		l.System = SystemPrompt(egress.Effective{})
		if err := EnableMemory(l, tt.window); err != nil {
			t.Fatalf("window %d: %v", tt.window, err)
		}
		got := names(l)
		for _, n := range tt.present {
			if !slices.Contains(got, n) {
				t.Errorf("window %d: tools %v lack %s", tt.window, got, n)
			}
		}
		for _, n := range tt.absent {
			if slices.Contains(got, n) {
				t.Errorf("window %d: tools %v still have %s", tt.window, got, n)
			}
		}
	}
	l, _, _ := newLoop(t, llmtest.Script{})
	l.Tools = tools.Default()
	if err := EnableMemory(l, 2_000); err == nil || !strings.Contains(err.Error(), "context window of 2000 tokens") {
		t.Errorf("a 2k window: err = %v, want a clear refusal", err)
	}
}
