package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentbox/agentbox/internal/llm"
)

// wrap maps an SDK error onto the llm sentinels. A cancelled ctx wins:
// the caller stopped the call, the provider did not fail.
func (m *Model) wrap(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("anthropic: %w", ctxErr(ctx))
	}
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		return m.apiError(apiErr)
	}
	return fmt.Errorf("anthropic: %w: %w", llm.ErrUnavailable, err)
}

// ctxErr is ctx's error, with its cause when one was given.
func ctxErr(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return fmt.Errorf("%w: %w", ctx.Err(), cause)
	}
	return ctx.Err()
}

// apiError maps an error the API answered, as an HTTP status or as an
// error event in a stream (status 200).
func (m *Model) apiError(e *anthropic.Error) error {
	typ := string(e.Type())
	msg := providerMessage(e)
	sentinel := classify(e.StatusCode, typ)
	switch {
	case sentinel == llm.ErrUnknownModel && !strings.Contains(strings.ToLower(msg), "model"):
		return fmt.Errorf("anthropic: %w: %d %s from %s: is ANTHROPIC_BASE_URL right? (%s)",
			llm.ErrNotConfigured, e.StatusCode, typ, m.baseURL(), msg)
	case sentinel == llm.ErrUnknownModel:
		return fmt.Errorf("anthropic: %w %q: %s", sentinel, m.cfg.Name, msg)
	case sentinel == llm.ErrAuth && m.cfg.APIKey == "":
		return fmt.Errorf("anthropic: %w: no key was sent: export ANTHROPIC_API_KEY=… (%s)", sentinel, msg)
	case e.StatusCode == http.StatusOK:
		return fmt.Errorf("anthropic: %w: %s in the stream: %s", sentinel, typ, msg)
	}
	return fmt.Errorf("anthropic: %w: %d %s: %s", sentinel, e.StatusCode, typ, msg)
}

// classify picks the sentinel of an error type, or of the status when the
// type is unknown.
func classify(status int, typ string) error {
	switch typ {
	case "authentication_error", "permission_error":
		return llm.ErrAuth
	case "not_found_error":
		return llm.ErrUnknownModel
	case "rate_limit_error":
		return llm.ErrRateLimited
	case "overloaded_error", "api_error", "timeout_error":
		return llm.ErrUnavailable
	case "invalid_request_error", "request_too_large":
		return llm.ErrBadRequest
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return llm.ErrAuth
	case status == http.StatusNotFound:
		return llm.ErrUnknownModel
	case status == http.StatusTooManyRequests:
		return llm.ErrRateLimited
	case status >= 400 && status < 500:
		return llm.ErrBadRequest
	}
	return llm.ErrUnavailable
}

// providerMessage is the message of the API's error body.
func providerMessage(e *anthropic.Error) string {
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(e.RawJSON()), &body) == nil && body.Error.Message != "" {
		return body.Error.Message
	}
	if raw := strings.TrimSpace(e.RawJSON()); raw != "" {
		return raw
	}
	return http.StatusText(e.StatusCode)
}

func (m *Model) baseURL() string {
	if m.cfg.BaseURL != "" {
		return m.cfg.BaseURL
	}
	return "https://api.anthropic.com"
}
