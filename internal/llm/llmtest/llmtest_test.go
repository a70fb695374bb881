package llmtest_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

// recorder is a testing.TB that keeps the server's complaints instead of
// failing the test, so the tests can check the server complains.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) complaints() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errs, "\n")
}

// post sends body to the server's path with the headers a client sends.
func post(t *testing.T, s *llmtest.Server, format, body string) (int, http.Header, string) {
	t.Helper()
	url := s.AnthropicURL() + "/v1/messages"
	if format == "openai" {
		url = s.OpenAIURL() + "/chat/completions"
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", "k")
	req.Header.Set("anthropic-version", "2023-06-01")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(data)
}

const (
	aTools = `"tools":[{"name":"bash","input_schema":{"type":"object"}}]`
	aCall  = `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"bash","input":{"command":"ls"}}]}`
	oTools = `"tools":[{"type":"function","function":{"name":"bash","parameters":{"type":"object"}}}]`
	oCall  = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"bash","arguments":"{}"}}]}`
)

func TestRejectsMalformed(t *testing.T) {
	tests := []struct {
		name, format, body, complaint string
	}{
		{"no max_tokens", "anthropic", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{"no messages", "anthropic", `{"model":"m","max_tokens":10,"messages":[]}`, "at least one message"},
		{"empty text", "anthropic", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":" "}]}]}`, "non-whitespace"},
		{"orphan result", "anthropic", `{"model":"m","max_tokens":10,` + aTools + `,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"x"}]}]}`, "answers no tool_use"},
		{"unanswered call", "anthropic", `{"model":"m","max_tokens":10,` + aTools + `,"messages":[{"role":"user","content":"go"},` + aCall + `,{"role":"user","content":"next"}]}`, "has no tool_result"},
		{"text before result", "anthropic", `{"model":"m","max_tokens":10,` + aTools + `,"messages":[{"role":"user","content":"go"},` + aCall + `,{"role":"user","content":[{"type":"text","text":"see"},{"type":"tool_result","tool_use_id":"toolu_1","content":"x"}]}]}`, "must begin with their tool_result"},
		{"tool blocks without tools", "anthropic", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"go"},` + aCall + `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1"}]}]}`, "must define tools"},
		{"call in user message", "anthropic", `{"model":"m","max_tokens":10,` + aTools + `,"messages":[{"role":"user","content":[{"type":"tool_use","id":"t","name":"bash","input":{}}]}]}`, "only allowed in assistant"},
		{"input not an object", "anthropic", `{"model":"m","max_tokens":10,` + aTools + `,"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"bash","input":"ls"}]}]}`, "must be a JSON object"},
		{"bad image", "anthropic", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"!!"}}]}]}`, "base64"},
		{"five breakpoints", "anthropic", `{"model":"m","max_tokens":10,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[` +
			strings.Repeat(`{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},`, 3) + `{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}]}]}`, "maximum of 4"},
		{"bad schema", "anthropic", `{"model":"m","max_tokens":10,"tools":[{"name":"x","input_schema":{"type":"string"}}],"messages":[{"role":"user","content":"hi"}]}`, "type must be"},
		{"orphan tool message", "openai", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"call_1","content":"x"}]}`, "must be a response"},
		{"unanswered tool call", "openai", `{"model":"m",` + oTools + `,"messages":[{"role":"user","content":"hi"},` + oCall + `,{"role":"user","content":"next"}]}`, "did not have response messages: call_1"},
		{"image in tool message", "openai", `{"model":"m",` + oTools + `,"messages":[{"role":"user","content":"hi"},` + oCall + `,{"role":"tool","tool_call_id":"call_1","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,cG5n"}}]}]}`, "text only"},
		{"arguments not JSON", "openai", `{"model":"m",` + oTools + `,"messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"bash","arguments":"{oops"}}]}]}`, "not valid JSON"},
		{"stream_options without stream", "openai", `{"model":"m","stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, "only allowed when 'stream'"},
		{"both token limits", "openai", `{"model":"m","max_tokens":5,"max_completion_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "cannot both"},
		{"no model", "openai", `{"messages":[{"role":"user","content":"hi"}]}`, "model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			s := llmtest.New(rec, llmtest.Steps(llmtest.Say("never")))
			status, h, body := post(t, s, tt.format, tt.body)
			if status != http.StatusBadRequest || h.Get("x-should-retry") != "false" || !strings.Contains(body, tt.complaint) {
				t.Errorf("answer %d (x-should-retry %q) %s; want 400 saying %q", status, h.Get("x-should-retry"), body, tt.complaint)
			}
			if !strings.Contains(rec.complaints(), tt.complaint) {
				t.Errorf("the test was not failed with %q: %q", tt.complaint, rec.complaints())
			}
			if s.Remaining() != 1 {
				t.Error("a malformed request used up a step")
			}
		})
	}
}

func TestAcceptsWellFormed(t *testing.T) {
	s := llmtest.New(t, llmtest.Steps(llmtest.Say("one"), llmtest.Say("two")))
	a := `{"model":"m","max_tokens":10,` + aTools + `,"system":"sys","messages":[{"role":"user","content":"go"},` + aCall +
		`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":[{"type":"text","text":"boom"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"cG5n"}}]},{"type":"text","text":"and?"}]}]}`
	o := `{"model":"m",` + oTools + `,"messages":[{"role":"system","content":"sys"},{"role":"user","content":"go"},` + oCall +
		`,{"role":"tool","tool_call_id":"call_1","content":"Error: boom"},{"role":"user","content":[{"type":"text","text":"and?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,cG5n"}}]}]}`
	for _, c := range []struct{ format, body string }{{"anthropic", a}, {"openai", o}} {
		if status, _, body := post(t, s, c.format, c.body); status != http.StatusOK {
			t.Fatalf("%s: %d %s", c.format, status, body)
		}
	}
	for _, r := range s.Requests() {
		msgs := r.Messages
		result := msgs[2].Content[0]
		if r.System != "sys" || len(msgs) != 3 || result.Text != "boom" || !result.IsError || r.Tools[0] != "bash" {
			t.Errorf("%s decoded as %+v", r.Format, r)
		}
		if err := llmtest.CheckPairs(msgs); err != nil {
			t.Errorf("%s: %v", r.Format, err)
		}
	}
}

func TestScriptBugsFailTheTest(t *testing.T) {
	rec := &recorder{TB: t}
	yes := true
	s := llmtest.New(rec, llmtest.Script{Steps: []llmtest.Step{
		{Branches: []llmtest.Turn{{When: &llmtest.Match{ResultError: &yes}, Text: "x"}}},
	}})
	hi := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	status, h, _ := post(t, s, "anthropic", hi)
	if status != http.StatusInternalServerError || h.Get("x-should-retry") != "false" || !strings.Contains(rec.complaints(), "no branch matches") {
		t.Errorf("unmatched step: %d, complaints %q", status, rec.complaints())
	}
	s.OnRequest(func(r llmtest.Recorded) error { return errors.New("prompt over the window") })
	if status, _, _ := post(t, s, "openai", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); status != http.StatusBadRequest ||
		!strings.Contains(rec.complaints(), "prompt over the window") {
		t.Errorf("OnRequest rejection: %d, complaints %q", status, rec.complaints())
	}
	s.OnRequest(nil)
	empty := &recorder{TB: t}
	s2 := llmtest.New(empty, llmtest.Script{})
	if status, _, body := post(t, s2, "anthropic", hi); status != http.StatusInternalServerError || !strings.Contains(body, "script exhausted") ||
		!strings.Contains(empty.complaints(), "script exhausted") {
		t.Errorf("exhausted script: %d %s", status, body)
	}
}

func TestRepeat(t *testing.T) {
	s := llmtest.New(t, llmtest.Script{Steps: []llmtest.Step{{Branches: []llmtest.Turn{llmtest.Say("again")}, Repeat: true}}})
	for range 3 {
		if status, _, _ := post(t, s, "openai", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); status != http.StatusOK {
			t.Fatal(status)
		}
	}
	if n := len(s.Requests()); n != 3 || s.Remaining() != 1 {
		t.Errorf("%d requests, %d steps left", n, s.Remaining())
	}
}

// sseEvents reads an event stream into the events' names (or, for
// data-only streams, their data).
func sseEvents(body string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			out = append(out, name)
		} else if data, ok := strings.CutPrefix(line, "data: "); ok && !strings.Contains(body, "event: ") {
			out = append(out, data)
		}
	}
	return out
}

func TestAnthropicEventSequence(t *testing.T) {
	s := llmtest.New(t, llmtest.Steps(llmtest.Turn{Text: "Hi there", ToolCalls: []llmtest.ToolCall{{Name: "bash", Input: map[string]string{"command": "ls -la /tmp"}}}}))
	_, _, body := post(t, s, "anthropic", `{"model":"m","max_tokens":10,"stream":true,`+aTools+`,"messages":[{"role":"user","content":"hi"}]}`)
	got := strings.Join(sseEvents(body), " ")
	want := "message_start content_block_start ping content_block_delta content_block_delta content_block_stop " +
		"content_block_start" + strings.Repeat(" content_block_delta", 5) + " content_block_stop message_delta message_stop"
	if got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(body, `"stop_reason":"tool_use"`) || !strings.Contains(body, `"partial_json":""`) {
		t.Errorf("body %s", body)
	}
}

func TestOpenAIChunks(t *testing.T) {
	usage := llm.Usage{InputTokens: 10, OutputTokens: 5, CacheReadTokens: 90}
	s := llmtest.New(t, llmtest.Steps(llmtest.Turn{Usage: &usage, ToolCalls: []llmtest.ToolCall{{Name: "bash", Input: map[string]string{"command": "ls -la /tmp"}}}}))
	_, _, body := post(t, s, "openai", `{"model":"m","stream":true,"stream_options":{"include_usage":true},`+oTools+`,"messages":[{"role":"user","content":"hi"}]}`)
	events := sseEvents(body)
	if events[len(events)-1] != "[DONE]" {
		t.Fatalf("no [DONE]: %v", events)
	}
	var args strings.Builder
	pieces := 0
	for _, e := range events[:len(events)-1] {
		var c struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Function struct{ Arguments string }
					} `json:"tool_calls"`
				}
			}
			Usage *struct {
				PromptTokens  int `json:"prompt_tokens"`
				PromptDetails struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			}
		}
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("chunk %s: %v", e, err)
		}
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				args.WriteString(tc.Function.Arguments)
				pieces++
			}
		}
		if c.Usage != nil && (c.Usage.PromptTokens != 100 || c.Usage.PromptDetails.Cached != 90) {
			t.Errorf("usage chunk %s", e)
		}
	}
	if args.String() != `{"command":"ls -la /tmp"}` || pieces < 3 {
		t.Errorf("arguments %q in %d pieces", args.String(), pieces)
	}
}

func TestCheckPairs(t *testing.T) {
	call := func(ids ...string) llm.Message {
		m := llm.Message{Role: llm.RoleAssistant}
		for _, id := range ids {
			m.Content = append(m.Content, llm.Block{Type: llm.BlockToolUse, ID: id, Name: "x"})
		}
		return m
	}
	result := func(ids ...string) llm.Message {
		m := llm.Message{Role: llm.RoleUser}
		for _, id := range ids {
			m.Content = append(m.Content, llm.Block{Type: llm.BlockToolResult, ID: id})
		}
		return m
	}
	user := llm.Text(llm.RoleUser, "task")
	tests := []struct {
		name string
		msgs []llm.Message
		bad  string
	}{
		{"paired", []llm.Message{user, call("a", "b"), result("b", "a"), call("c"), result("c")}, ""},
		{"open call at the end", []llm.Message{user, call("a")}, ""},
		{"missing result", []llm.Message{user, call("a", "b"), result("a")}, `"b"`},
		{"orphan result", []llm.Message{user, result("a")}, `"a"`},
		{"result too late", []llm.Message{user, call("a"), user, result("a")}, "no tool_result"},
		{"answered twice", []llm.Message{user, call("a"), result("a", "a")}, "twice"},
		{"repeated ID", []llm.Message{user, call("a", "a")}, "repeated"},
	}
	for _, tt := range tests {
		err := llmtest.CheckPairs(tt.msgs)
		if (tt.bad == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.bad) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.bad)
		}
	}
}

// TestStallEndsWithTheTest: an answer stalled for a client that never
// leaves does not keep the server from closing when the test ends.
func TestStallEndsWithTheTest(t *testing.T) {
	var body io.ReadCloser
	t.Run("stalled", func(t *testing.T) {
		s := llmtest.New(t, llmtest.Steps(llmtest.Turn{Text: "wait", Stall: true}))
		req, _ := http.NewRequest(http.MethodPost, s.OpenAIURL()+"/chat/completions",
			strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body = res.Body
	}) // the subtest's cleanup closed the server under the stalled answer
	defer body.Close()
	data, _ := io.ReadAll(body)
	if !strings.Contains(string(data), `"content":"wait"`) || strings.Contains(string(data), "[DONE]") {
		t.Errorf("stalled stream %s", data)
	}
}
