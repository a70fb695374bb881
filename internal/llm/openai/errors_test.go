package openai_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/llm/llmtest/providertest"
	"github.com/agentbox/agentbox/internal/llm/openai"
)

// errorCases are the HTTP failures of Chat Completions, with what the error
// must mention of their bodies.
var errorCases = []providertest.ErrorCase{
	{Name: "rate limited", Turn: llmtest.Turn{Status: 429, RetryAfter: providertest.FastRetry}, Repeat: true, Want: llm.ErrRateLimited, Requests: 3, Mention: "rate_limit_exceeded"},
	{Name: "no quota", Turn: llmtest.Turn{Status: 429, ErrorType: "insufficient_quota", RetryAfter: providertest.FastRetry}, Repeat: true, Want: llm.ErrAuth, Requests: 3, Mention: "insufficient_quota"},
	{Name: "overloaded", Turn: llmtest.Turn{Status: 503, RetryAfter: providertest.FastRetry}, Repeat: true, Want: llm.ErrUnavailable, Requests: 3, Mention: "503 server_error"},
	{Name: "server error", Turn: llmtest.Turn{Status: 500, RetryAfter: providertest.FastRetry}, Repeat: true, Want: llm.ErrUnavailable, Requests: 3, Mention: "500 server_error"},
	{Name: "refused key", Turn: llmtest.Turn{Status: 401}, Want: llm.ErrAuth, Requests: 1, Mention: "Incorrect API key"},
	{Name: "forbidden", Turn: llmtest.Turn{Status: 403}, Want: llm.ErrAuth, Requests: 1, Mention: "403"},
	{Name: "unknown model", Turn: llmtest.Turn{Status: 404}, Want: llm.ErrUnknownModel, Requests: 1, Mention: `"gpt-test"`},
	{Name: "bad request", Turn: llmtest.Turn{Status: 400}, Want: llm.ErrBadRequest, Requests: 1, Mention: "invalid_request_error"},
	{Name: "too large", Turn: llmtest.Turn{Status: 413}, Want: llm.ErrBadRequest, Requests: 1, Mention: "413"},
}

// midStreamErrors are the error events of a Chat Completions stream.
var midStreamErrors = []providertest.MidStreamCase{
	{ErrorType: "server_error", Want: llm.ErrUnavailable},
	{ErrorType: "overloaded", Want: llm.ErrUnavailable},
	{ErrorType: "requests", Want: llm.ErrRateLimited},
	{ErrorType: "invalid_request_error", Want: llm.ErrBadRequest},
}

func TestNotConfigured(t *testing.T) {
	_, err := openai.New(openai.Config{Name: "gpt-4.1"})
	if !errors.Is(err, llm.ErrNotConfigured) || !strings.Contains(err.Error(), "OPENAI_API_KEY") ||
		!strings.Contains(err.Error(), "OPENAI_BASE_URL") {
		t.Errorf("err = %v; want ErrNotConfigured naming OPENAI_API_KEY and OPENAI_BASE_URL", err)
	}
	_, err = openai.New(openai.Config{APIKey: "k"})
	if !errors.Is(err, llm.ErrNotConfigured) {
		t.Errorf("no name: err = %v", err)
	}
}

// TestLocalServerWithoutKey: Ollama and friends need no key; none is sent.
func TestLocalServerWithoutKey(t *testing.T) {
	s := llmtest.New(t, llmtest.Steps(llmtest.Say("hi from llama")))
	_, resp := providertest.Collect(t, newModel(t, s, false, func(c *openai.Config) { c.APIKey = "" }), providertest.Ask("hi"))
	if resp.Message.PlainText() != "hi from llama" || s.Requests()[0].APIKey != "" {
		t.Errorf("answer %q, key sent %q", resp.Message.PlainText(), s.Requests()[0].APIKey)
	}
}

// TestRefusedWithoutKey: a server that wants a key says which is missing.
func TestRefusedWithoutKey(t *testing.T) {
	s := llmtest.New(t, llmtest.Steps(llmtest.Turn{Status: 401}))
	err := providertest.StreamErr(t, newModel(t, s, false, func(c *openai.Config) { c.APIKey = "" }))
	if !errors.Is(err, llm.ErrAuth) || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Errorf("err = %v; want ErrAuth naming OPENAI_API_KEY", err)
	}
}
