package providertest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

// ComputerTool is a desktop tool with both forms: native computer use on a
// 1366x768 screen, and a function schema for models without it.
var ComputerTool = llm.Tool{
	Name:        "computer",
	Description: "Use the desktop: screenshots, mouse and keyboard.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"action":{"type":"string","enum":["screenshot","left_click"]},` +
		`"coordinate":{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":2}},"required":["action"],"additionalProperties":false}`),
	Native: &llm.NativeTool{Kind: llm.NativeKindComputer, DisplayWidth: 1366, DisplayHeight: 768, DisplayNumber: 1},
}

// testComputerTool: a tool with a native form reaches a model that has it
// (Info.NativeComputerUse) as the native tool, and any other model as a
// function with its schema; either way its calls and results (a
// screenshot) go back and forth like any tool's.
func testComputerTool(t *testing.T, p Provider) {
	eachMode(t, func(t *testing.T, noStream bool) {
		s := llmtest.New(t, llmtest.Steps(
			llmtest.Call("computer", map[string]any{"action": "left_click", "coordinate": []int{683, 384}}),
			llmtest.Say("I see the desktop.")))
		m := p.Open(t, s, Options{NoStream: noStream})
		req := Ask("click the middle")
		req.Tools = append(req.Tools, ComputerTool)
		_, first := Collect(t, m, req)
		calls := first.Message.ToolUses()
		if len(calls) != 1 || calls[0].Name != "computer" {
			t.Fatalf("calls %+v, want one computer call", calls)
		}
		png := []byte("\x89PNG\r\n\x1a\n fake screenshot")
		req.Messages = append(req.Messages, first.Message, llm.Message{Role: llm.RoleUser, Content: []llm.Block{
			{Type: llm.BlockToolResult, ID: calls[0].ID, Text: "left_click at (683, 384)",
				Images: []llm.Image{{MediaType: "image/png", Data: png}}},
		}})
		if _, second := Collect(t, m, req); second.Message.PlainText() != "I see the desktop." {
			t.Errorf("second answer %q", second.Message.PlainText())
		}
		for i, rec := range s.Requests() {
			checkToolForms(t, p, i, rec.ToolSpecs)
		}
	})
}

// checkToolForms checks the tools of Ask and ComputerTool as received.
func checkToolForms(t *testing.T, p Provider, i int, got []llm.Tool) {
	t.Helper()
	if len(got) != 3 || got[0].Native != nil || got[0].Name != "bash" || len(got[0].InputSchema) == 0 {
		t.Fatalf("request %d: tools %+v", i, got)
	}
	c := got[2]
	if p.Info.NativeComputerUse {
		if c.Native == nil || *c.Native != *ComputerTool.Native || c.Name != "computer" || len(c.InputSchema) != 0 {
			t.Errorf("request %d: computer tool %+v (native %+v), want the native form %+v", i, c, c.Native, *ComputerTool.Native)
		}
		return
	}
	if c.Native != nil || c.Name != "computer" || c.Description != ComputerTool.Description || !sameJSON(c.InputSchema, ComputerTool.InputSchema) {
		t.Errorf("request %d: computer tool %+v, want the function form with its schema", i, c)
	}
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return false
	}
	var va, vb any
	_ = json.Unmarshal(x.Bytes(), &va)
	_ = json.Unmarshal(y.Bytes(), &vb)
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}
