package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

// fakeSummarizer is the model's stand-in: it fails when told to, and
// otherwise answers a line per call plus Pad bytes.
type fakeSummarizer struct {
	Fail  bool
	Pad   int
	Calls int
	Turns int // messages seen
}

func (f *fakeSummarizer) Summarize(_ context.Context, prev string, turns []llm.Message, maxTokens int) (string, error) {
	f.Calls++
	f.Turns += len(turns)
	if f.Fail {
		return "", errors.New("model unavailable")
	}
	if err := llmtest.CheckPairs(turns); err != nil {
		return "", fmt.Errorf("summarizer got broken turns: %w", err)
	}
	line := fmt.Sprintf("%d messages from %s (%.30s).", len(turns), turns[0].Role, turns[0].PlainText())
	return clipTail(prev, 400) + "\n" + line + strings.Repeat("s", f.Pad), nil
}

func clipTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

const taskText = "Fix the failing tests in the repository and report what was wrong."

func task() llm.Message { return llm.Text(llm.RoleUser, taskText) }

// fillerBase is lines of tool-looking output that filler slices.
var fillerBase = func() string {
	var sb strings.Builder
	for i := 0; sb.Len() < 4<<20; i++ {
		fmt.Fprintf(&sb, "line %d: ok src/pkg%d/file_%d.go (%d tests)\n", i, i%7, i%13, i%101)
	}
	return sb.String()
}()

// filler is n bytes of text that looks like tool output, different for
// each seed.
func filler(seed, n int) string {
	if n > len(fillerBase)/2 {
		return strings.Repeat("x", n)
	}
	off := (seed * 7919) % (len(fillerBase) - n)
	return fillerBase[off : off+n]
}

// addStep appends step s: an assistant message with calls tool calls
// (plain text if 0) and the user message answering them, each with out
// bytes of output.
func addStep(h []llm.Message, s, calls, out int) []llm.Message {
	if calls == 0 {
		h = append(h, llm.Text(llm.RoleAssistant, fmt.Sprintf("Step %d: thinking aloud.", s)))
		return append(h, llm.Text(llm.RoleUser, "Go on."))
	}
	asst := llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: fmt.Sprintf("Step %d: running things.", s)}}}
	var res []llm.Block
	for c := range calls {
		id := fmt.Sprintf("call_%d_%d", s, c)
		in, _ := json.Marshal(map[string]string{"cmd": fmt.Sprintf("go test ./pkg%d/...", c)})
		asst.Content = append(asst.Content, llm.Block{Type: llm.BlockToolUse, ID: id, Name: "bash", Input: in})
		res = append(res, llm.Block{Type: llm.BlockToolResult, ID: id, Text: filler(s*10+c, out), IsError: c%2 == 1})
	}
	return append(h, asst, llm.Message{Role: llm.RoleUser, Content: res})
}

// history is the task and steps steps of one call with out bytes each.
func history(steps, out int) []llm.Message {
	h := []llm.Message{task()}
	for s := 1; s <= steps; s++ {
		h = addStep(h, s, 1, out)
	}
	return h
}

// checkPrompt asserts what every prompt must be.
func checkPrompt(t *testing.T, m *Manager, p Prompt) {
	t.Helper()
	if err := llmtest.CheckPairs(p.Messages); err != nil {
		t.Fatalf("pairs: %v", err)
	}
	first := p.Messages[0]
	if first.Role != llm.RoleUser || len(first.Content) == 0 || first.Content[0].Text != taskText {
		t.Fatalf("first message is not the task: %+v", first)
	}
	if got := m.Estimator().Messages(p.Messages); got != p.Estimate {
		t.Fatalf("Estimate %d, but the messages estimate %d", p.Estimate, got)
	}
	if b := m.Config().Budget(); p.Estimate > b {
		t.Fatalf("prompt of %d tokens over the budget of %d", p.Estimate, b)
	}
	if n := countImages(p.Messages); n > MaxImages {
		t.Fatalf("prompt carries %d images, over %d", n, MaxImages)
	}
}

func countImages(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs {
		for _, b := range m.Content {
			n += len(b.Images)
		}
	}
	return n
}

func kinds(cs []Condensation) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Kind)
	}
	return out
}
