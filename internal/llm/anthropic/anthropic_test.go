package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/anthropic"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

// modes are the two ways the client talks to the API.
var modes = []struct {
	name     string
	noStream bool
}{{"stream", false}, {"whole", true}}

func newModel(t *testing.T, s *llmtest.Server, noStream bool, edit ...func(*anthropic.Config)) *anthropic.Model {
	t.Helper()
	cfg := anthropic.Config{Name: "claude-test-4", APIKey: "sk-ant-test", BaseURL: s.AnthropicURL(), NoStream: noStream}
	for _, e := range edit {
		e(&cfg)
	}
	m, err := anthropic.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// run streams req and collects its events and response.
func run(t *testing.T, m llm.Model, req llm.Request) ([]llm.Event, llm.Response) {
	t.Helper()
	seq, err := m.Stream(context.Background(), req)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	var events []llm.Event
	resp, err := llm.Collect(seq, func(ev llm.Event) { events = append(events, ev) })
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	return events, resp
}

func ask(text string) llm.Request {
	return llm.Request{
		System:   "You are a test.",
		Messages: []llm.Message{llm.Text(llm.RoleUser, text)},
		Tools: []llm.Tool{
			{Name: "bash", Description: "Run a command.", InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)},
			{Name: "finish", Description: "Finish.", InputSchema: json.RawMessage(`{"type":"object","properties":{"summary":{"type":"string"}},"additionalProperties":false}`)},
		},
	}
}

func TestText(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			const want = "Hello, World! Ünïcödé ✓ across several deltas."
			s := llmtest.New(t, llmtest.Steps(llmtest.Say(want)))
			events, resp := run(t, newModel(t, s, mode.noStream), ask("say hello"))
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
			if !mode.noStream && deltas < 2 {
				t.Errorf("text arrived in %d deltas, want several", deltas)
			}
			if last := events[len(events)-1]; last.Type != llm.EventDone {
				t.Errorf("last event %s, want done", last.Type)
			}
			if resp.StopReason != "end_turn" || resp.Usage.InputTokens == 0 || resp.Usage.OutputTokens == 0 {
				t.Errorf("stop %q usage %+v", resp.StopReason, resp.Usage)
			}
			rec := s.Requests()[0]
			if rec.Stream == mode.noStream || rec.Model != "claude-test-4" || rec.APIKey != "sk-ant-test" ||
				rec.System != "You are a test." || rec.MaxTokens != anthropic.DefaultMaxOutput {
				t.Errorf("request: stream %v model %q key %q system %q max %d", rec.Stream, rec.Model, rec.APIKey, rec.System, rec.MaxTokens)
			}
		})
	}
}

func TestToolCalls(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			turn := llmtest.Turn{Text: "Running it.", ToolCalls: []llmtest.ToolCall{
				{Name: "bash", Input: map[string]any{"command": `printf 'a "quoted" line\n' > out.txt && cat out.txt`}},
				{Name: "finish", Input: map[string]any{"summary": "done ✓"}},
			}}
			s := llmtest.New(t, llmtest.Steps(turn))
			events, resp := run(t, newModel(t, s, mode.noStream), ask("work"))
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
			if calls[1].Name != "finish" || !strings.HasPrefix(calls[1].ID, "toolu_") || calls[0].ID == calls[1].ID {
				t.Errorf("calls %+v", calls)
			}
		})
	}
}

func TestToolResultRoundTrip(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			yes, no := true, false
			s := llmtest.New(t, llmtest.Script{Steps: []llmtest.Step{
				{Branches: []llmtest.Turn{llmtest.Call("bash", map[string]string{"command": "python3 hello.py"})}},
				{Branches: []llmtest.Turn{
					{When: &llmtest.Match{ResultError: &no}, Text: "it worked"},
					{When: &llmtest.Match{ResultError: &yes, ResultContains: "SyntaxError"}, Text: "fixing the syntax error"},
				}},
			}})
			m := newModel(t, s, mode.noStream)
			req := ask("run it")
			_, first := run(t, m, req)
			call := first.Message.ToolUses()[0]
			png := []byte("\x89PNG\r\n\x1a\n fake image")
			req.Messages = append(req.Messages, first.Message, llm.Message{Role: llm.RoleUser, Content: []llm.Block{
				{Type: llm.BlockText, Text: "Note: the screen is attached."},
				{Type: llm.BlockToolResult, ID: call.ID, Text: "SyntaxError: invalid syntax", IsError: true,
					Images: []llm.Image{{MediaType: "image/png", Data: png}}},
			}})
			_, second := run(t, m, req)
			if got := second.Message.PlainText(); got != "fixing the syntax error" {
				t.Errorf("second answer %q: the branch on the error did not match", got)
			}
			rec := s.Requests()[1]
			result := rec.Messages[2].Content[0] // tool results are sent first
			if result.Type != llm.BlockToolResult || result.ID != call.ID || !result.IsError ||
				len(result.Images) != 1 || !bytes.Equal(result.Images[0].Data, png) {
				t.Errorf("tool result as received: %+v", result)
			}
		})
	}
}

func TestUsageAndCost(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			usage := llm.Usage{InputTokens: 1000, OutputTokens: 500, CacheReadTokens: 20_000, CacheWriteTokens: 3000}
			s := llmtest.New(t, llmtest.Steps(llmtest.Turn{Text: "ok", Usage: &usage}))
			price := llm.Price{InputPerMTok: 3, OutputPerMTok: 15, CacheReadPerMTok: 0.3, CacheWritePerMTok: 3.75}
			m := newModel(t, s, mode.noStream, func(c *anthropic.Config) { c.Price = price })
			_, resp := run(t, m, ask("hi"))
			if resp.Usage != usage {
				t.Errorf("usage %+v, want %+v", resp.Usage, usage)
			}
			want := (1000*3 + 500*15 + 20_000*0.3 + 3000*3.75) / 1e6
			if got := m.Info().Price.Cost(resp.Usage); got < want-1e-9 || got > want+1e-9 {
				t.Errorf("cost %v, want %v", got, want)
			}
		})
	}
}

// TestPromptCaching checks the breakpoints on the wire: the system prompt,
// the last tool and the last message.
func TestPromptCaching(t *testing.T) {
	s := llmtest.New(t, llmtest.Steps(llmtest.Say("ok")))
	run(t, newModel(t, s, false), ask("hi"))
	var body struct {
		System []struct {
			CacheControl *struct{ Type string } `json:"cache_control"`
		}
		Tools []struct {
			CacheControl *struct{ Type string } `json:"cache_control"`
		}
		Messages []struct {
			Content []struct {
				CacheControl *struct{ Type string } `json:"cache_control"`
			}
		}
	}
	if err := json.Unmarshal(s.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	msgs := body.Messages
	last := msgs[len(msgs)-1].Content
	switch {
	case body.System[0].CacheControl == nil || body.System[0].CacheControl.Type != "ephemeral":
		t.Error("system prompt has no cache breakpoint")
	case body.Tools[0].CacheControl != nil || body.Tools[1].CacheControl == nil:
		t.Error("the breakpoint is not on the last tool only")
	case last[len(last)-1].CacheControl == nil:
		t.Error("last message has no cache breakpoint")
	}
}

func TestMaxTokens(t *testing.T) {
	s := llmtest.New(t, llmtest.Steps(llmtest.Say("a"), llmtest.Say("b")))
	m := newModel(t, s, false, func(c *anthropic.Config) { c.MaxOutput = 64_000 })
	req := ask("hi")
	req.MaxTokens = 1000
	run(t, m, req)
	req.MaxTokens = 1_000_000
	run(t, m, req)
	if got := []int{s.Requests()[0].MaxTokens, s.Requests()[1].MaxTokens}; got[0] != 1000 || got[1] != 64_000 {
		t.Errorf("max_tokens sent %v, want [1000 64000]", got)
	}
}
