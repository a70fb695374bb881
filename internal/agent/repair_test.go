package agent

import (
	"testing"

	"github.com/agentbox/agentbox/internal/agent/tools"

	"github.com/agentbox/agentbox/internal/llm"
)

func TestCloseDangling(t *testing.T) {
	call := llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{
		{Type: llm.BlockText, Text: "running two things"},
		{Type: llm.BlockToolUse, ID: "a", Name: "bash"}, {Type: llm.BlockToolUse, ID: "b", Name: "bash"}}}
	got := CloseDangling([]llm.Message{llm.Text(llm.RoleUser, "task"), call}, "interrupted")
	if len(got) != 3 || got[2].Role != llm.RoleUser || len(got[2].Content) != 2 ||
		got[2].Content[1].ID != "b" || !got[2].Content[1].IsError {
		t.Fatalf("got %+v", got)
	}
	done := []llm.Message{llm.Text(llm.RoleUser, "task"), llm.Text(llm.RoleAssistant, "done")}
	if len(CloseDangling(done, "x")) != 2 {
		t.Error("a finished conversation was changed")
	}
}

func TestRepeatTracker(t *testing.T) {
	var r repeatTracker
	fail := tools.Result{IsError: true, Text: "FAILED test_app.py::test_health"}
	ok := tools.Result{Text: "fine"}
	c := llm.Block{Name: "bash", Input: []byte(`{"command": "pytest", "timeout_seconds": 5}`)}
	same := llm.Block{Name: "bash", Input: []byte(`{"timeout_seconds":5,"command":"pytest"}`)}
	read := llm.Block{Name: "read_file", Input: []byte(`{"path":"app.py"}`)}
	if r.observe(c, fail, 3) != "" || r.observe(read, ok, 3) != "" || r.observe(same, fail, 3) != "" {
		t.Fatal("note before the limit")
	}
	r.observe(read, ok, 3) // other calls in between do not reset the count
	if note := r.observe(c, fail, 3); note == "" {
		t.Fatal("no note at the third identical failure")
	}
	if r.observe(c, tools.Result{IsError: true, Text: "another error"}, 3) != "" {
		t.Error("a different error must start a new count")
	}
	if r.observe(c, ok, 3) != "" || r.observe(c, fail, 3) != "" {
		t.Error("the call succeeding must reset the count")
	}
}
