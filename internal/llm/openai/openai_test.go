package openai_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/llm/llmtest/providertest"
	"github.com/agentbox/agentbox/internal/llm/openai"
)

// TestConformance runs the suite every llm.Model passes; the error shapes
// of Chat Completions servers are in errors_test.go.
func TestConformance(t *testing.T) {
	providertest.Run(t, providertest.Provider{
		Open: func(t *testing.T, s *llmtest.Server, o providertest.Options) llm.Model {
			return newModel(t, s, o.NoStream, func(c *openai.Config) {
				c.MaxRetries, c.MaxOutput, c.Price = o.MaxRetries, o.MaxOutput, o.Price
			})
		},
		Info: llm.ModelInfo{Provider: "openai", Name: "gpt-test", ContextWindow: openai.DefaultContextWindow,
			MaxOutputTokens: openai.DefaultMaxOutput},
		APIKey:       "sk-test",
		ToolIDPrefix: "call_",
		// Chat Completions carries the images of tool results in a user
		// message after the tool messages; the server decodes both into
		// one message.
		ImagesApart: true,
		// The SDK does not wait at all when Retry-After is over two
		// minutes.
		LongRetryAfter:  time.Minute,
		Errors:          errorCases,
		MidStreamErrors: midStreamErrors,
	})
}

func newModel(t *testing.T, s *llmtest.Server, noStream bool, edit ...func(*openai.Config)) *openai.Model {
	t.Helper()
	cfg := openai.Config{Name: "gpt-test", APIKey: "sk-test", BaseURL: s.OpenAIURL(), NoStream: noStream}
	for _, e := range edit {
		e(&cfg)
	}
	m, err := openai.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// TestWireFormat checks what goes over the wire: a tool message per result
// in order, the images of results in a user message after them, the error
// prefix, and the usage chunk asked for.
func TestWireFormat(t *testing.T) {
	s := llmtest.New(t, llmtest.Steps(llmtest.Say("ok")))
	req := providertest.Ask("hi")
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{
			{Type: llm.BlockText, Text: "Two calls."},
			{Type: llm.BlockToolUse, ID: "call_1", Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)},
			{Type: llm.BlockToolUse, ID: "call_2", Name: "bash", Input: json.RawMessage(`{"command":"false"}`)},
		}},
		llm.Message{Role: llm.RoleUser, Content: []llm.Block{
			{Type: llm.BlockToolResult, ID: "call_1", Text: "a.txt", Images: []llm.Image{{MediaType: "image/png", Data: []byte("png")}}},
			{Type: llm.BlockToolResult, ID: "call_2", Text: "exit status 1", IsError: true},
		}})
	providertest.Collect(t, newModel(t, s, false), req)
	var body struct {
		Messages []struct {
			Role       string          `json:"role"`
			ToolCallID string          `json:"tool_call_id"`
			Content    json.RawMessage `json:"content"`
		}
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(s.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range body.Messages {
		roles = append(roles, m.Role+":"+m.ToolCallID)
	}
	if got := strings.Join(roles, " "); got != "system: user: assistant: tool:call_1 tool:call_2 user:" {
		t.Errorf("messages %s", got)
	}
	if got := string(body.Messages[4].Content); got != `"Error: exit status 1"` {
		t.Errorf("failed result sent as %s", got)
	}
	if last := string(body.Messages[5].Content); !strings.Contains(last, "call_1") || !strings.Contains(last, "data:image/png;base64,cG5n") {
		t.Errorf("images of results sent as %s", last)
	}
	if !body.StreamOptions.IncludeUsage {
		t.Error("stream_options.include_usage not set")
	}
	rec := s.Requests()[0]
	if res := rec.Messages[2].Content; len(res) != 4 || !res[1].IsError || res[3].Type != llm.BlockImage {
		t.Errorf("as the server decoded it: %+v", res)
	}
}

// TestMaxTokensField: OpenAI itself gets max_completion_tokens, a server
// behind a base URL max_tokens, unless it serves a reasoning model.
func TestMaxTokensField(t *testing.T) {
	s := llmtest.New(t, llmtest.Steps(llmtest.Say("ok")))
	var seen string
	proxy := &http.Client{Transport: rewrite(t, s.OpenAIURL(), func(body []byte) {
		var b map[string]any
		_ = json.Unmarshal(body, &b)
		for _, k := range []string{"max_tokens", "max_completion_tokens"} {
			if b[k] != nil {
				seen += k
			}
		}
	})}
	m, err := openai.New(openai.Config{Name: "gpt-4.1", APIKey: "sk-test", HTTPClient: proxy})
	if err != nil {
		t.Fatal(err)
	}
	providertest.Collect(t, m, providertest.Ask("hi"))
	if seen != "max_completion_tokens" {
		t.Errorf("official API got %q", seen)
	}
	if body := string(s.Requests()[0].Body); !strings.Contains(body, `"max_completion_tokens":4096`) {
		t.Errorf("body %s", body)
	}
	for name, want := range map[string]string{"llama3.1": `"max_tokens":4096`, "openai/gpt-5": `"max_completion_tokens":4096`} {
		s := llmtest.New(t, llmtest.Steps(llmtest.Say("ok")))
		providertest.Collect(t, newModel(t, s, false, func(c *openai.Config) { c.Name = name }), providertest.Ask("hi"))
		if body := string(s.Requests()[0].Body); !strings.Contains(body, want) {
			t.Errorf("%s behind a base URL: body %s, want %s", name, body, want)
		}
	}
}

// TestComputerToolAsFunction: Chat Completions has no native computer use,
// so the desktop tool goes as a function with its schema, and no beta.
func TestComputerToolAsFunction(t *testing.T) {
	s := llmtest.New(t, llmtest.Steps(llmtest.Say("ok")))
	req := providertest.Ask("hi")
	req.Tools = append(req.Tools, providertest.ComputerTool)
	providertest.Collect(t, newModel(t, s, false), req)
	var body struct {
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(s.Requests()[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	c := body.Tools[2]
	var got, want any
	_ = json.Unmarshal(c.Function.Parameters, &got)
	_ = json.Unmarshal(providertest.ComputerTool.InputSchema, &want)
	if c.Type != "function" || c.Function.Name != "computer" || !reflect.DeepEqual(got, want) {
		t.Errorf("computer tool sent as %+v", c)
	}
	if strings.Contains(string(s.Requests()[0].Body), "computer_20250124") {
		t.Error("the native tool type reached an OpenAI-compatible server")
	}
}
