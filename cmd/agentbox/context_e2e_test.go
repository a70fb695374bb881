package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

// longScript runs the counter command until step `recallAt`, then recalls the
// fact planted at step 5 and finishes once the recall finds it. Summarizer
// requests (no tools) get summary, or an HTTP error when summaryStatus is set.
func longScript(recallAt int, summaryStatus int) llmtest.Script {
	counter := fmt.Sprintf(`n=$(( $(cat .n 2>/dev/null || echo 0) + 1 )); echo $n > .n
[ $n = 5 ] && echo "the secret code is PURPLE-ELEPHANT-42"
[ $n = %d ] && echo "REACHED-THE-END"
[ $((n %% 250)) = 0 ] && head -c 60000 /dev/zero | tr '\0' y
head -c 3000 /dev/zero | tr '\0' x; echo`, recallAt)
	summary := llmtest.Say("Summary: ran the counter step after step; nothing failed.")
	if summaryStatus != 0 {
		summary = llmtest.Turn{Status: summaryStatus, ErrorType: "invalid_request_error"}
	}
	summary.When = &llmtest.Match{NoTools: true}
	return llmtest.Script{Steps: []llmtest.Step{{Repeat: true, Branches: []llmtest.Turn{
		summary,
		when("step 5 (tool_result", llmtest.Call("finish", map[string]any{"summary": "recalled the code"})),
		when("REACHED-THE-END", llmtest.Call("recall", map[string]any{"query": "secret code"})),
		llmtest.Call("bash", map[string]any{"command": counter}),
	}}}}
}

// checkPrompts makes the fake model refuse any prompt over the window or
// with an unanswered tool call, as a real provider would.
func checkPrompts(fake *llmtest.Server, window int, biggest *atomic.Int64) {
	fake.OnRequest(func(r llmtest.Recorded) error {
		tokens := int64(r.RawBytes / 4) // the fake's own token count
		for old := biggest.Load(); tokens > old && !biggest.CompareAndSwap(old, tokens); old = biggest.Load() {
		}
		if tokens > int64(window) {
			return fmt.Errorf("prompt of ~%d tokens is over the %d-token window", tokens, window)
		}
		return llmtest.CheckPairs(r.Messages)
	})
}

func condensations(evs []eventDTO) map[string]int {
	kinds := map[string]int{}
	for _, ev := range evs {
		if ev.Type == "condensation" {
			var p struct {
				Kind string `json:"kind"`
			}
			json.Unmarshal(ev.Payload, &p)
			kinds[p.Kind]++
		}
	}
	return kinds
}

func TestLongJobFitsSmallWindowAndRecalls(t *testing.T) {
	const window, steps = 16000, 1900
	s, fake := modelServer(t, "anthropic", longScript(steps, 0))
	var biggest atomic.Int64
	checkPrompts(fake, window, &biggest)
	j := s.runJob(t, "Run the counter until it says so, then tell me the secret code from the beginning.",
		map[string]any{"max_steps": steps + 50, "context_window": window})
	if j.Status != "complete" {
		t.Fatalf("job %+v", j)
	}
	var full struct {
		Steps         int   `json:"steps"`
		ContextTokens int64 `json:"context_tokens"`
	}
	s.do("GET", "/v1/jobs/"+j.JobID, nil, &full)
	if full.Steps != steps+2 || full.ContextTokens <= 0 || full.ContextTokens > window {
		t.Errorf("steps %d (want %d), context %d tokens", full.Steps, steps+2, full.ContextTokens)
	}
	evs := s.events(j.JobID)
	texts, _ := s.toolResults(j.JobID)
	if last := texts[len(texts)-2]; !strings.Contains(last, "PURPLE-ELEPHANT-42") || !strings.Contains(last, "step 5 (") {
		t.Errorf("recall at step %d found %q", steps+1, last)
	}
	kinds := condensations(evs)
	if kinds["mask"] == 0 || kinds["summarize"] == 0 {
		t.Errorf("condensations %v: want masking and summaries", kinds)
	}
	t.Logf("%d steps, %d requests, largest prompt ~%d tokens, condensations %v", full.Steps, len(fake.Requests()), biggest.Load(), kinds)
}

func TestFailingSummarizerFallsBackToTruncation(t *testing.T) {
	const window, steps = 8000, 200
	s, fake := modelServer(t, "anthropic", longScript(steps, 400))
	var biggest atomic.Int64
	checkPrompts(fake, window, &biggest)
	j := s.runJob(t, "Run the counter, then recall the code.", map[string]any{"max_steps": steps + 50, "context_window": window})
	if j.Status != "complete" {
		t.Fatalf("job %+v", j)
	}
	if kinds := condensations(s.events(j.JobID)); kinds["truncate"] == 0 || kinds["summarize"] != 0 {
		t.Errorf("condensations %v: want truncation and no summary", kinds)
	}
}
