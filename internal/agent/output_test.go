package agent

import (
	"reflect"
	"testing"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/store"
)

// TestRebuildIgnoresLiveOutput: the output events a command wrote while it
// ran (between its call and its result, and a step cut before its result)
// are for viewers: the rebuilt conversation is the same without them.
func TestRebuildIgnoresLiveOutput(t *testing.T) {
	call := func(id string) llm.Block {
		return llm.Block{Type: llm.BlockToolUse, ID: id, Name: "bash", Input: []byte(`{}`)}
	}
	out := func(id, text string) store.Event {
		return logged(event.TypeOutput, event.Output{Call: id, Stream: "stdout", Text: text})
	}
	with := []store.Event{
		logged(event.TypeModel, map[string]any{"step": 1, "message": llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{call("a")}}}),
		out("a", "one\n"),
		logged(event.TypeLog, event.Log{Level: "info", Message: "this job's commands have written more than 8 MiB of output"}),
		out("a", "two\n"),
		logged(event.TypeToolResult, map[string]any{"step": 1, "id": "a", "name": "bash", "text": "exit code: 0 (success)\n<stdout>\none\ntwo\n</stdout>\n"}),
		logged(event.TypeModel, map[string]any{"step": 2, "message": llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{call("b")}}}),
		out("b", "cut short\n"), // the server died before b's result
	}
	var without []store.Event
	for _, ev := range with {
		if ev.Type != event.TypeOutput && ev.Type != event.TypeLog {
			without = append(without, ev)
		}
	}
	got, steps := Rebuild("the task", with)
	want, _ := Rebuild("the task", without)
	if !reflect.DeepEqual(got, want) || steps != 2 {
		t.Errorf("rebuilt with output events:\n%+v\nwithout:\n%+v", got, want)
	}
}
