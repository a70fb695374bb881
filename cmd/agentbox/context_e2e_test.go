package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

// longScript runs a counter command step after step, recalls the fact
// planted at step 5 at step recallAt, and finishes at step total.
// Summarizer requests (no tools) get a summary, or an HTTP error when
// summaryStatus is set.
func longScript(recallAt, total int, summaryStatus int) llmtest.Script {
	// Written at step 1, run from step 2 on (step k is run n = k-1). The
	// markers are built when it runs, so only its output holds them, not
	// the model's calls that recall also searches.
	counter := fmt.Sprintf(`n=$(( $(cat .n 2>/dev/null || echo 0) + 1 )); echo $n > .n
[ $n = 4 ] && echo "the secret code is PURPLE-ELEPHANT-42"
[ $n = %d ] && echo "TIME-TO-$(echo RECALL)"
[ $n = %d ] && echo "TIME-TO-$(echo FINISH)"
[ $((n %% 250)) = 0 ] && head -c 60000 /dev/zero | tr '\0' y
head -c 3000 /dev/zero | tr '\0' x; echo
`, recallAt-2, total-3)
	summary := llmtest.Say("Summary: ran the counter step after step; nothing failed.")
	if summaryStatus != 0 {
		summary = llmtest.Turn{Status: summaryStatus, ErrorType: "invalid_request_error"}
	}
	summary.When = &llmtest.Match{NoTools: true}
	return llmtest.Script{Steps: []llmtest.Step{
		{Branches: []llmtest.Turn{llmtest.Call("write_file", map[string]any{"path": "counter.sh", "content": counter})}},
		{Repeat: true, Branches: []llmtest.Turn{
			summary,
			when("TIME-TO-FINISH", llmtest.Call("finish", map[string]any{"summary": "done"})),
			when("TIME-TO-RECALL", llmtest.Call("recall", map[string]any{"query": "secret code"})),
			llmtest.Call("bash", map[string]any{"command": "sh counter.sh"}),
		}},
	}}
}

// recallResult returns the text of the job's recall result and its step.
func recallResult(evs []eventDTO) (string, int) {
	for _, ev := range evs {
		var p struct {
			Step int    `json:"step"`
			Name string `json:"name"`
			Text string `json:"text"`
		}
		if ev.Type == "tool_result" && json.Unmarshal(ev.Payload, &p) == nil && p.Name == "recall" {
			return p.Text, p.Step
		}
	}
	return "", 0
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
	t.Parallel()
	const window, steps, recallAt = 16000, 2000, 1900
	s, fake := modelServer(t, "anthropic", longScript(recallAt, steps, 0))
	var biggest atomic.Int64
	checkPrompts(fake, window, &biggest)
	j := s.runJob(t, "Run the counter until it says so; recall the secret code when told.",
		map[string]any{"max_steps": steps + 50, "context_window": window})
	if j.Status != "complete" {
		t.Fatalf("job %+v", j)
	}
	var full struct {
		Steps         int   `json:"steps"`
		ContextTokens int64 `json:"context_tokens"`
	}
	s.do("GET", "/v1/jobs/"+j.JobID, nil, &full)
	if full.Steps != steps || full.ContextTokens <= 0 || full.ContextTokens > window {
		t.Errorf("steps %d (want %d), context %d tokens", full.Steps, steps, full.ContextTokens)
	}
	evs := s.events(j.JobID)
	text, step := recallResult(evs)
	if step != recallAt || !strings.Contains(text, "PURPLE-ELEPHANT-42") || !strings.Contains(text, "step 5 (") {
		t.Errorf("recall at step %d found %.300q", step, text)
	}
	kinds := condensations(evs)
	if kinds["mask"] == 0 || kinds["summarize"] == 0 {
		t.Errorf("condensations %v: want masking and summaries", kinds)
	}
	t.Logf("%d steps, %d requests, largest prompt ~%d tokens, condensations %v", full.Steps, len(fake.Requests()), biggest.Load(), kinds)
}

func TestFailingSummarizerFallsBackToTruncation(t *testing.T) {
	t.Parallel()
	const window, steps = 8000, 200
	s, fake := modelServer(t, "anthropic", longScript(150, steps, 400))
	var biggest atomic.Int64
	checkPrompts(fake, window, &biggest)
	j := s.runJob(t, "Run the counter, then recall the code.", map[string]any{"max_steps": steps + 50, "context_window": window})
	if j.Status != "complete" {
		t.Fatalf("job %+v", j)
	}
	evs := s.events(j.JobID)
	if kinds := condensations(evs); kinds["truncate"] == 0 || kinds["summarize"] != 0 {
		t.Errorf("condensations %v: want truncation and no summary", kinds)
	}
	if text, _ := recallResult(evs); !strings.Contains(text, "PURPLE-ELEPHANT-42") {
		t.Errorf("recall after truncation found %.200q", text)
	}
}
