package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest/providertest"
	"github.com/agentbox/agentbox/internal/llm/openai"
)

// Compatible servers differ from OpenAI in small ways; these tests replay
// what they send, verbatim, from a canned server.

// canned answers every request with status and body; event-stream bodies
// are sent as such.
func canned(t *testing.T, status int, body string) *openai.Model {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(body, "data:"):
			w.Header().Set("Content-Type", "text/event-stream")
		case strings.HasPrefix(body, "{"):
			w.Header().Set("Content-Type", "application/json")
		default:
			w.Header().Set("Content-Type", "text/plain")
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	m, err := openai.New(openai.Config{Name: "llama9", BaseURL: srv.URL + "/v1", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func collect(m llm.Model) (llm.Response, error) {
	seq, err := m.Stream(context.Background(), providertest.Ask("hi"))
	if err != nil {
		return llm.Response{}, err
	}
	return llm.Collect(seq, nil)
}

func TestCompatErrors(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		want    error
		mention string
	}{
		{"ollama unknown model", 404, `{"error":"model \"llama9\" not found, try pulling it first"}`, llm.ErrUnknownModel, `"llama9"`},
		{"base URL without /v1", 404, "404 page not found", llm.ErrNotConfigured, "OPENAI_BASE_URL"},
		{"vllm error in the stream", 200, "data: {\"error\":{\"object\":\"error\",\"message\":\"prompt too long\",\"type\":\"BadRequestError\",\"param\":null,\"code\":400}}\n\n", llm.ErrBadRequest, "prompt too long"},
		{"stream cut off", 200, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n", llm.ErrUnavailable, "finish_reason"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := collect(canned(t, tt.status, tt.body))
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("err = %v; want %v mentioning %q", err, tt.want, tt.mention)
			}
		})
	}
}

// TestCompatToolCalls: every call at index 0 with its own ID, finish_reason
// stop despite the calls, arguments that are not JSON, a call without ID.
func TestCompatToolCalls(t *testing.T) {
	chunk := func(delta string, finish string) string {
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + "}]}\n\n"
	}
	body := chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"bash","arguments":"{\"command\":"}}]}`, "") +
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"ls\"}"}}]}`, "") +
		chunk(`{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"bash","arguments":"ls -la"}}]}`, "") +
		chunk(`{"tool_calls":[{"index":1,"type":"function","function":{"name":"finish","arguments":""}}]}`, "") +
		chunk(`{}`, "stop") + "data: [DONE]\n\n"
	resp, err := collect(canned(t, 200, body))
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolUses()
	if len(calls) != 3 || resp.StopReason != "tool_use" {
		t.Fatalf("calls %+v stop %q", calls, resp.StopReason)
	}
	var bad string
	if string(calls[0].Input) != `{"command":"ls"}` || calls[1].ID != "call_b" || json.Unmarshal(calls[1].Input, &bad) != nil || bad != "ls -la" {
		t.Errorf("calls %s %s", calls[0].Input, calls[1].Input)
	}
	if !strings.HasPrefix(calls[2].ID, "call_") || string(calls[2].Input) != "{}" {
		t.Errorf("unnamed call %+v", calls[2])
	}
}
