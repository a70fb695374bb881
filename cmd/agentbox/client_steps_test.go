package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

// TestLogsShowsStepsLikeATerminal: logs shows a bash call as the command
// itself, &&, < and > as they are, its long output folded, and no escape
// byte off a terminal; --json still prints the events as stored.
func TestLogsShowsStepsLikeATerminal(t *testing.T) {
	e := clientEnv(t)
	id := e.Submit("x").ID
	e.Start(id)
	const command = `cd /workspace && python3 hello.py < in.txt > "out.txt"`
	input, _ := json.Marshal(map[string]string{"command": command})
	var output strings.Builder
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&output, "row %d \x1b[31m\n", i)
	}
	e.Emit(id, event.ToolCall{ID: "a", Name: "bash", Step: 1, Input: input})
	e.Emit(id, event.ToolResult{ID: "a", Name: "bash", Step: 1, Text: output.String()})
	e.Finish(id, store.StatusComplete, "")

	out, errOut := mustRun(t, "logs", id)
	if !strings.Contains(errOut, "\n$ "+command+"\n") {
		t.Errorf("stderr lacks the command as it is:\n%s", errOut)
	}
	if !strings.Contains(out, "  │ row 10 [31m\n  │ … 30 lines hidden …\n  │ row 41 [31m\n") || strings.Contains(out, "row 11 ") {
		t.Errorf("stdout is not the output folded to its head and tail:\n%s", out)
	}
	if strings.ContainsRune(out+errOut, 0x1b) {
		t.Errorf("escape bytes off a terminal:\n%q\n%q", out, errOut)
	}

	out, _ = mustRun(t, "logs", "--json", id)
	var found bool
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev wire.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("logs --json line %q: %v", l, err)
		}
		if ev.Type == "tool_call" {
			found = true
			if !strings.Contains(l, `"command":"cd /workspace \u0026\u0026 python3 hello.py \u003c in.txt \u003e \"out.txt\""`) {
				t.Errorf("logs --json tool_call changed: %s", l)
			}
		}
	}
	if !found {
		t.Errorf("logs --json has no tool_call:\n%s", out)
	}
}
