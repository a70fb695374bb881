package providertest

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

func testText(t *testing.T, p Provider) {
	eachMode(t, func(t *testing.T, noStream bool) {
		const want = "Hello, World! Ünïcödé ✓ across several deltas."
		s := llmtest.New(t, llmtest.Steps(llmtest.Say(want)))
		events, resp := Collect(t, p.Open(t, s, Options{NoStream: noStream}), Ask("say hello"))
		var got strings.Builder
		deltas := 0
		for _, ev := range events {
			if ev.Type == llm.EventText {
				got.WriteString(ev.Text)
				deltas++
			}
		}
		if got.String() != want || resp.Message.PlainText() != want {
			t.Errorf("text = %q, response %q; want %q", got.String(), resp.Message.PlainText(), want)
		}
		if !noStream && deltas < 2 {
			t.Errorf("text arrived in %d deltas, want several", deltas)
		}
		if last := events[len(events)-1]; last.Type != llm.EventDone {
			t.Errorf("last event %s, want done", last.Type)
		}
		if resp.StopReason != "end_turn" || resp.Usage.InputTokens == 0 || resp.Usage.OutputTokens == 0 {
			t.Errorf("stop %q usage %+v", resp.StopReason, resp.Usage)
		}
		rec := s.Requests()[0]
		if rec.Stream == noStream || rec.Model != p.Info.Name || rec.APIKey != p.APIKey ||
			rec.System != "You are a test." || rec.MaxTokens != p.Info.MaxOutputTokens {
			t.Errorf("request: stream %v model %q key %q system %q max %d", rec.Stream, rec.Model, rec.APIKey, rec.System, rec.MaxTokens)
		}
	})
}

func testToolCalls(t *testing.T, p Provider) {
	eachMode(t, func(t *testing.T, noStream bool) {
		turn := llmtest.Turn{Text: "Running it.", ToolCalls: []llmtest.ToolCall{
			{Name: "bash", Input: map[string]any{"command": `printf 'a "quoted" line\n' > out.txt && cat out.txt`}},
			{Name: "finish", Input: map[string]any{"summary": "done ✓"}},
		}}
		s := llmtest.New(t, llmtest.Steps(turn))
		events, resp := Collect(t, p.Open(t, s, Options{NoStream: noStream}), Ask("work"))
		var calls []llm.Block
		for _, ev := range events {
			if ev.Type == llm.EventToolUse {
				calls = append(calls, *ev.ToolUse)
			}
		}
		if len(calls) != 2 || resp.StopReason != "tool_use" {
			t.Fatalf("calls %+v, stop %q", calls, resp.StopReason)
		}
		if got := resp.Message.ToolUses(); len(got) != 2 || got[0].ID != calls[0].ID {
			t.Errorf("response calls %+v, events %+v", got, calls)
		}
		var in struct{ Command string }
		if err := json.Unmarshal(calls[0].Input, &in); err != nil || !strings.Contains(in.Command, `"quoted"`) {
			t.Errorf("input %s: %v", calls[0].Input, err)
		}
		if calls[1].Name != "finish" || !strings.HasPrefix(calls[1].ID, p.ToolIDPrefix) || calls[0].ID == calls[1].ID {
			t.Errorf("calls %+v", calls)
		}
	})
}

func testToolResultRoundTrip(t *testing.T, p Provider) {
	eachMode(t, func(t *testing.T, noStream bool) {
		yes, no := true, false
		s := llmtest.New(t, llmtest.Script{Steps: []llmtest.Step{
			{Branches: []llmtest.Turn{llmtest.Call("bash", map[string]string{"command": "python3 hello.py"})}},
			{Branches: []llmtest.Turn{
				{When: &llmtest.Match{ResultError: &no}, Text: "it worked"},
				{When: &llmtest.Match{ResultError: &yes, ResultContains: "SyntaxError"}, Text: "fixing the syntax error"},
			}},
		}})
		m := p.Open(t, s, Options{NoStream: noStream})
		req := Ask("run it")
		_, first := Collect(t, m, req)
		call := first.Message.ToolUses()[0]
		png := []byte("\x89PNG\r\n\x1a\n fake image")
		req.Messages = append(req.Messages, first.Message, llm.Message{Role: llm.RoleUser, Content: []llm.Block{
			{Type: llm.BlockText, Text: "Note: the screen is attached."},
			{Type: llm.BlockToolResult, ID: call.ID, Text: "SyntaxError: invalid syntax", IsError: true,
				Images: []llm.Image{{MediaType: "image/png", Data: png}}},
		}})
		_, second := Collect(t, m, req)
		if got := second.Message.PlainText(); got != "fixing the syntax error" {
			t.Errorf("second answer %q: the branch on the error did not match", got)
		}
		got := s.Requests()[1].Messages[2].Content
		result := got[0] // tool results are sent first
		images := result.Images
		if p.ImagesApart {
			img := got[len(got)-1]
			if img.Type != llm.BlockImage {
				t.Errorf("last block %s, want the result's image", img.Type)
			}
			images = img.Images
		}
		if result.Type != llm.BlockToolResult || result.ID != call.ID || !result.IsError ||
			len(images) != 1 || !bytes.Equal(images[0].Data, png) {
			t.Errorf("tool result as received: %+v", got)
		}
	})
}

func testUsageAndCost(t *testing.T, p Provider) {
	eachMode(t, func(t *testing.T, noStream bool) {
		usage := llm.Usage{InputTokens: 1000, OutputTokens: 500, CacheReadTokens: 20_000, CacheWriteTokens: 3000}
		s := llmtest.New(t, llmtest.Steps(llmtest.Turn{Text: "ok", Usage: &usage}))
		price := llm.Price{InputPerMTok: 3, OutputPerMTok: 15, CacheReadPerMTok: 0.3, CacheWritePerMTok: 3.75}
		m := p.Open(t, s, Options{NoStream: noStream, Price: price})
		_, resp := Collect(t, m, Ask("hi"))
		if resp.Usage != usage {
			t.Errorf("usage %+v, want %+v", resp.Usage, usage)
		}
		want := (1000*3 + 500*15 + 20_000*0.3 + 3000*3.75) / 1e6
		if got := m.Info().Price.Cost(resp.Usage); got < want-1e-9 || got > want+1e-9 {
			t.Errorf("cost %v, want %v", got, want)
		}
	})
}

// testMaxTokens: a request's limit is sent, unless it is over the model's.
func testMaxTokens(t *testing.T, p Provider) {
	s := llmtest.New(t, llmtest.Steps(llmtest.Say("a"), llmtest.Say("b")))
	m := p.Open(t, s, Options{MaxOutput: 64_000})
	req := Ask("hi")
	req.MaxTokens = 1000
	Collect(t, m, req)
	req.MaxTokens = 1_000_000
	Collect(t, m, req)
	if got := []int{s.Requests()[0].MaxTokens, s.Requests()[1].MaxTokens}; got[0] != 1000 || got[1] != 64_000 {
		t.Errorf("max_tokens sent %v, want [1000 64000]", got)
	}
}

func testInfo(t *testing.T, p Provider) {
	s := llmtest.New(t, llmtest.Script{})
	if info := p.Open(t, s, Options{}).Info(); info != p.Info {
		t.Errorf("info %+v, want %+v", info, p.Info)
	}
}
