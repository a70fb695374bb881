package agent

import (
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/memory"
	"github.com/agentbox/agentbox/internal/store"
)

// logged is an event as the log holds it. The tests give payloads as maps,
// as logs written before package event hold them, and partial: Rebuild
// must read those too.
func logged(typ string, p any) store.Event {
	b, _ := json.Marshal(p)
	return store.Event{Type: typ, Payload: b}
}

func TestRebuildAnswersAnInterruptedStep(t *testing.T) {
	call := func(id string) llm.Block {
		return llm.Block{Type: llm.BlockToolUse, ID: id, Name: "bash", Input: []byte(`{}`)}
	}
	evs := []store.Event{
		logged(event.TypeModel, map[string]any{"step": 1, "message": llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{call("a")}}}),
		logged(event.TypeToolResult, map[string]any{"step": 1, "id": "a", "name": "bash", "text": "one"}),
		logged(event.TypeNotice, map[string]any{"step": 1, "text": nudge, "said": true}),
		logged(event.TypeModel, map[string]any{"step": 2, "message": llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{call("b"), call("c")}}}),
		logged(event.TypeToolResult, map[string]any{"step": 2, "id": "b", "name": "bash", "text": "two"}),
		// the server died before c's result
	}
	msgs, steps := Rebuild("the task", evs)
	if steps != 2 {
		t.Errorf("steps %d, want 2", steps)
	}
	if err := llmtest.CheckPairs(msgs); err != nil {
		t.Fatalf("rebuilt history is not sendable: %v", err)
	}
	last := msgs[len(msgs)-1].Content
	if len(last) != 2 || last[1].ID != "c" || !last[1].IsError || !strings.Contains(last[1].Text, "restarted") {
		t.Errorf("last message %+v", last)
	}
	if msgs[0].PlainText() != TaskMessage("the task") {
		t.Errorf("first message %q", msgs[0].PlainText())
	}
}

func TestRecallByStep(t *testing.T) {
	idx := &memory.Index{}
	idx.Add(11, "tool_result bash", "eleven")
	idx.Add(12, "model", "running the tests")
	idx.Add(12, "tool_result bash", strings.Repeat("z", 50_000)+"THE-END")
	res, err := recallTool{idx}.Run(context.Background(), nil, []byte(`{"query":"Step 12"}`))
	if err != nil || res.IsError {
		t.Fatal(res, err)
	}
	if !strings.Contains(res.Text, "running the tests") || !strings.Contains(res.Text, "THE-END") ||
		strings.Contains(res.Text, "eleven") || len(res.Text) > 2*recallStepBytes {
		t.Errorf("recall of step 12: %d bytes: %.200q", len(res.Text), res.Text)
	}
}

// A chat resumed from its saved messages gets its recall index back: step N
// is the model's N-th answer, as the memory's stubs number steps, and
// recall's own results are not indexed again.
func TestIndexHistory(t *testing.T) {
	call := func(id, name, input string) llm.Message {
		return llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockToolUse, ID: id, Name: name, Input: json.RawMessage(input)}}}
	}
	result := func(id, text string) llm.Message {
		return llm.Message{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockToolResult, ID: id, Text: text}}}
	}
	l := &Loop{Recall: &memory.Index{}, Messages: []llm.Message{
		llm.Text(llm.RoleUser, "the task mentions zebra"),
		call("a", "bash", `{"command":"ls"}`), result("a", "giraffe.txt"),
		call("b", "recall", `{"query":"giraffe"}`), result("b", "step 1 (tool_result bash): giraffe.txt"),
		llm.Text(llm.RoleAssistant, "done with the okapi"),
	}}
	IndexHistory(l)
	for query, want := range map[string][]memory.Hit{
		"giraffe": {{Step: 1, Kind: "tool_result bash"}, {Step: 2, Kind: "model"}},
		"okapi":   {{Step: 3, Kind: "model"}},
		"zebra":   nil, // the user's messages are not indexed, as live
	} {
		hits := l.Recall.Search(query, 10)
		var got []memory.Hit
		for _, h := range hits {
			got = append(got, memory.Hit{Step: h.Step, Kind: h.Kind})
		}
		sort.Slice(got, func(i, j int) bool { return got[i].Step < got[j].Step })
		if !reflect.DeepEqual(got, want) {
			t.Errorf("recall %q: %+v, want %+v", query, got, want)
		}
	}
}
