package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/agentbox/agentbox/internal/llm"
)

// maxErrorBody bounds how much of an error response is kept.
const maxErrorBody = 64 << 10

// apiFailure is an error the server answered, as an HTTP status or as an
// error chunk in a stream (status 200).
type apiFailure struct {
	status          int
	typ, code, text string
}

// lastError keeps the status and body of the last error response of one
// call: compatible servers do not always answer errors in OpenAI's shape
// (Ollama's native {"error": "..."}, a proxy's text), and the SDK then
// reports only that it could not decode them.
type lastError struct {
	status int
	body   []byte
}

// keep is an SDK middleware recording error responses; the body is put
// back for the SDK to read.
func (l *lastError) keep(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	l.status, l.body = 0, nil // only the last attempt counts
	res, err := next(req)
	if err != nil || res == nil || res.StatusCode < 400 {
		return res, err
	}
	body, readErr := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	_ = res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(body))
	l.status, l.body = res.StatusCode, body
	return res, readErr
}

// message is the error's text as the server wrote it.
func (l *lastError) message() string {
	var shaped struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	var text string
	if json.Unmarshal(l.body, &shaped) == nil {
		var inner struct{ Message string }
		switch {
		case json.Unmarshal(shaped.Error, &text) == nil:
		case json.Unmarshal(shaped.Error, &inner) == nil && inner.Message != "":
			text = inner.Message
		default:
			text = shaped.Message
		}
	}
	if text == "" {
		text = strings.TrimSpace(string(l.body))
	}
	if len(text) > 300 {
		text = text[:300] + "…"
	}
	return text
}

// wrap maps an SDK error onto the llm sentinels. A cancelled ctx wins: the
// caller stopped the call, the provider did not fail.
func (m *Model) wrap(ctx context.Context, err error, last *lastError) error {
	if ctx.Err() != nil {
		return fmt.Errorf("openai: %w", ctxErr(ctx))
	}
	var apiErr *openai.Error
	var streamErr *ssestream.StreamError
	switch {
	case errors.As(err, &apiErr):
		return m.failure(apiFailure{apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Message})
	case errors.As(err, &streamErr):
		return m.failure(streamFailure(streamErr))
	case last != nil && last.status >= 400:
		return m.failure(apiFailure{status: last.status, text: last.message()})
	}
	return fmt.Errorf("openai: %w: %w", llm.ErrUnavailable, err)
}

// ctxErr is ctx's error, with its cause when one was given.
func ctxErr(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return fmt.Errorf("%w: %w", ctx.Err(), cause)
	}
	return ctx.Err()
}

// streamFailure reads the error chunk of a stream. vLLM puts the HTTP
// status it stands for in code.
func streamFailure(e *ssestream.StreamError) apiFailure {
	var body struct {
		Error struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
	}
	f := apiFailure{status: http.StatusOK, text: e.Message}
	if json.Unmarshal(e.Event.Data, &body) != nil {
		return f
	}
	f.typ, f.text = body.Error.Type, body.Error.Message
	var code string
	if json.Unmarshal(body.Error.Code, &code) == nil {
		f.code = code
	} else if n, err := strconv.Atoi(string(body.Error.Code)); err == nil {
		f.status = n
	}
	return f
}

// failure words the error with what to do about it.
func (m *Model) failure(f apiFailure) error {
	sentinel := classify(f)
	detail := strings.TrimSpace(strings.Join([]string{f.typ, f.code}, " "))
	switch {
	case sentinel == llm.ErrUnknownModel && !mentionsModel(f):
		return fmt.Errorf("openai: %w: %d from %s/chat/completions: is OPENAI_BASE_URL right? It usually ends in /v1 (%s)",
			llm.ErrNotConfigured, f.status, m.baseURL(), f.text)
	case sentinel == llm.ErrUnknownModel:
		return fmt.Errorf("openai: %w %q at %s: %s%s", sentinel, m.cfg.Name, m.baseURL(), f.text, m.pullHint())
	case sentinel == llm.ErrAuth && m.cfg.APIKey == "":
		return fmt.Errorf("openai: %w: no key was sent: export OPENAI_API_KEY=… (%d %s)", sentinel, f.status, f.text)
	case f.status == http.StatusOK:
		return fmt.Errorf("openai: %w: error in the stream: %s: %s", sentinel, detail, f.text)
	}
	return fmt.Errorf("openai: %w: %d %s: %s", sentinel, f.status, detail, f.text)
}

// classify picks the sentinel of a failure.
func classify(f apiFailure) error {
	kind := strings.ToLower(f.typ + " " + f.code)
	switch {
	case strings.Contains(kind, "insufficient_quota"):
		return llm.ErrAuth // no retry helps an account without credit
	case f.status == http.StatusUnauthorized || f.status == http.StatusForbidden || strings.Contains(kind, "invalid_api_key"):
		return llm.ErrAuth
	case f.status == http.StatusNotFound || strings.Contains(kind, "model_not_found"):
		return llm.ErrUnknownModel
	case f.status == http.StatusTooManyRequests || strings.Contains(kind, "rate_limit") || f.typ == "requests" || f.typ == "tokens":
		return llm.ErrRateLimited
	case f.status >= 500 || strings.Contains(kind, "server_error") || strings.Contains(kind, "overloaded"):
		return llm.ErrUnavailable
	case f.status >= 400 || strings.Contains(kind, "invalid_request"):
		return llm.ErrBadRequest
	}
	return llm.ErrUnavailable
}

func mentionsModel(f apiFailure) bool {
	return f.code == "model_not_found" || strings.Contains(strings.ToLower(f.text), "model")
}

// pullHint tells an Ollama user how to get the model.
func (m *Model) pullHint() string {
	if strings.Contains(m.cfg.BaseURL, ":11434") {
		return fmt.Sprintf(" (for Ollama: ollama pull %s)", m.cfg.Name)
	}
	return ""
}

func (m *Model) baseURL() string {
	if m.cfg.BaseURL != "" {
		return strings.TrimSuffix(m.cfg.BaseURL, "/")
	}
	return "https://api.openai.com/v1"
}
