package anthropic_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/anthropic"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/llm/llmtest/providertest"
)

// errorCases are the HTTP failures of the Messages API, with what the
// error must mention of their bodies.
var errorCases = []providertest.ErrorCase{
	{Name: "rate limited", Turn: llmtest.Turn{Status: 429, RetryAfter: providertest.FastRetry}, Repeat: true, Want: llm.ErrRateLimited, Requests: 3, Mention: "rate limit"},
	{Name: "overloaded", Turn: llmtest.Turn{Status: 529, RetryAfter: providertest.FastRetry}, Repeat: true, Want: llm.ErrUnavailable, Requests: 3, Mention: "overloaded_error"},
	{Name: "server error", Turn: llmtest.Turn{Status: 500, RetryAfter: providertest.FastRetry}, Repeat: true, Want: llm.ErrUnavailable, Requests: 3, Mention: "api_error"},
	{Name: "refused key", Turn: llmtest.Turn{Status: 401}, Want: llm.ErrAuth, Requests: 1, Mention: "invalid x-api-key"},
	{Name: "forbidden", Turn: llmtest.Turn{Status: 403}, Want: llm.ErrAuth, Requests: 1, Mention: "permission_error"},
	{Name: "unknown model", Turn: llmtest.Turn{Status: 404}, Want: llm.ErrUnknownModel, Requests: 1, Mention: `"claude-test-4"`},
	{Name: "bad request", Turn: llmtest.Turn{Status: 400, ErrorType: "invalid_request_error"}, Want: llm.ErrBadRequest, Requests: 1, Mention: "invalid_request_error"},
	{Name: "too large", Turn: llmtest.Turn{Status: 413}, Want: llm.ErrBadRequest, Requests: 1, Mention: "request_too_large"},
}

// midStreamErrors are the error events of the Messages stream.
var midStreamErrors = []providertest.MidStreamCase{
	{ErrorType: "overloaded_error", Want: llm.ErrUnavailable},
	{ErrorType: "api_error", Want: llm.ErrUnavailable},
	{ErrorType: "rate_limit_error", Want: llm.ErrRateLimited},
	{ErrorType: "invalid_request_error", Want: llm.ErrBadRequest},
}

func TestNotConfigured(t *testing.T) {
	_, err := anthropic.New(anthropic.Config{Name: "claude-sonnet-4-5"})
	if !errors.Is(err, llm.ErrNotConfigured) || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Errorf("err = %v; want ErrNotConfigured naming ANTHROPIC_API_KEY", err)
	}
	_, err = anthropic.New(anthropic.Config{APIKey: "k"})
	if !errors.Is(err, llm.ErrNotConfigured) {
		t.Errorf("no name: err = %v", err)
	}
}

// TestGatewayWithoutKey: a base URL without a key is allowed, and the
// refusal that follows says which key is missing.
func TestGatewayWithoutKey(t *testing.T) {
	s := llmtest.New(t, llmtest.Steps(llmtest.Say("never")))
	err := providertest.StreamErr(t, newModel(t, s, false, func(c *anthropic.Config) { c.APIKey = "" }))
	if !errors.Is(err, llm.ErrAuth) || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Errorf("err = %v; want ErrAuth naming ANTHROPIC_API_KEY", err)
	}
}
