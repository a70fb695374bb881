package agent

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/agent/tools"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/memory"
	"github.com/agentbox/agentbox/internal/store"
)

// TestResumeReadsWhatTheLoopWrites: the events a job's loop emits, stored
// and read back as a restarted job reads them, rebuild its conversation,
// its step count and its context state exactly. It covers every event type
// the agent writes.
func TestResumeReadsWhatTheLoopWrites(t *testing.T) {
	failing := &fakeTool{name: "check", res: tools.Result{IsError: true, Text: "FAILED: 1 test\n" + strings.Repeat("a line of test output\n", 400)}}
	check := one(llmtest.Call("check", map[string]any{"verbose": true}))
	l, _, _ := newLoop(t, llmtest.Script{Steps: []llmtest.Step{check, check, check, one(llmtest.Say("thinking")), check, one(finishTurn())}}, failing)
	var logged []store.Event
	l.Emit = func(p event.Payload) {
		typ, b, err := event.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		logged = append(logged, store.Event{Seq: int64(len(logged) + 1), Type: typ, Payload: b})
	}
	l.Messages = []llm.Message{llm.Text(llm.RoleUser, TaskMessage("the task"))}
	if err := EnableMemory(l, 8000); err != nil {
		t.Fatal(err)
	}
	a := New(Config{})
	if out, err := a.drive(context.Background(), &jobs.Run{}, l, stepLimits{max: 20}); err != nil || out.Status != store.StatusComplete {
		t.Fatalf("drive: %+v %v", out, err)
	}
	types := map[string]bool{}
	for _, ev := range logged {
		types[ev.Type] = true
	}
	for _, typ := range []string{event.TypeModel, event.TypeToolCall, event.TypeToolResult, event.TypeNotice, event.TypeCondensation} {
		if !types[typ] {
			t.Errorf("the loop wrote no %s event; the test must cover every type", typ)
		}
	}

	msgs, steps := Rebuild("the task", logged)
	if steps != l.Steps {
		t.Errorf("rebuilt %d steps, the loop took %d", steps, l.Steps)
	}
	if got, want := jsonOf(t, msgs), jsonOf(t, l.Messages); got != want {
		t.Errorf("rebuilt conversation differs from the loop's:\n got %.2000s\nwant %.2000s", got, want)
	}
	resumed := &Loop{Recall: &memory.Index{}}
	restoreMemory(resumed, logged)
	if resumed.MemState != l.MemState || l.MemState.CondensedSteps+l.MemState.MaskedSteps == 0 {
		t.Errorf("restored context state %+v, the loop's %+v", resumed.MemState, l.MemState)
	}
	if hits := resumed.Recall.Search("FAILED", 10); !slices.ContainsFunc(hits, func(h memory.Hit) bool { return h.Kind == "tool_result check" }) {
		t.Errorf("restored recall index finds %+v for FAILED", hits)
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
