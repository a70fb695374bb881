package llmtest

import (
	"cmp"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// serveOpenAI answers POST /v1/chat/completions. Like Ollama and other
// local servers it needs no key, but records the one it gets.
func (s *Server) serveOpenAI(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.malformed(w, formatOpenAI, err)
		return
	}
	if r.Header.Get("Authorization") != "" && bearer(r) == "" {
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "malformed Authorization header", 0)
		return
	}
	req, rec, err := decodeOpenAI(body)
	if err != nil {
		s.malformed(w, formatOpenAI, err)
		return
	}
	rec.APIKey, rec.At = bearer(r), time.Now()
	turn, ids, status, err := s.admit(rec)
	if err != nil {
		testBug(w, formatOpenAI, status, err)
		return
	}
	s.answerOpenAI(w, r, req, rec, turn, ids)
}

func (s *Server) answerOpenAI(w http.ResponseWriter, r *http.Request, req oRequest, rec Recorded, turn Turn, ids []string) {
	if turn.Status != 0 || (turn.MidStream && !req.Stream) {
		status, typ := turn.Status, turn.ErrorType
		if status == 0 {
			status = openAIStatusOf(typ)
		}
		if typ == "" {
			typ = openAITypeOf(status)
		}
		code, msg := openAICodeOf(status, req.Model)
		openAIError(w, status, typ, code, msg, turn.RetryAfter)
		return
	}
	rep, err := buildReply(turn, ids, rec)
	if err != nil {
		s.t.Errorf("llmtest: %v", err)
		testBug(w, formatOpenAI, http.StatusInternalServerError, err)
		return
	}
	c := completion{id: s.nextID("chatcmpl-llmtest"), model: req.Model, created: time.Now().Unix(), rep: rep}
	if !req.Stream {
		if turn.Stall {
			s.stall(r)
			return
		}
		writeJSON(w, http.StatusOK, c.whole())
		return
	}
	c.stream(newSSE(w), func() { s.stall(r) }, req.includeUsage())
}

// completion renders one answer in the Chat Completions format.
type completion struct {
	id, model string
	created   int64
	rep       reply
}

func (c completion) finishReason() string {
	if len(c.rep.calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func (c completion) usage() obj {
	u := c.rep.usage
	details := obj{"cached_tokens": u.CacheReadTokens}
	if u.CacheWriteTokens > 0 {
		details["cache_write_tokens"] = u.CacheWriteTokens
	}
	prompt := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
	return obj{
		"prompt_tokens": prompt, "completion_tokens": u.OutputTokens,
		"total_tokens": prompt + u.OutputTokens, "prompt_tokens_details": details,
		"completion_tokens_details": obj{"reasoning_tokens": 0},
	}
}

// whole is the non-streamed answer.
func (c completion) whole() obj {
	msg := obj{"role": "assistant", "content": nil, "refusal": nil}
	if c.rep.text != "" {
		msg["content"] = c.rep.text
	}
	var calls []obj
	for _, tc := range c.rep.calls {
		calls = append(calls, obj{"id": tc.ID, "type": "function",
			"function": obj{"name": tc.Name, "arguments": string(tc.Input)}})
	}
	if calls != nil {
		msg["tool_calls"] = calls
	}
	return obj{
		"id": c.id, "object": "chat.completion", "created": c.created, "model": c.model,
		"choices": []obj{{"index": 0, "message": msg, "finish_reason": c.finishReason(), "logprobs": nil}},
		"usage":   c.usage(),
	}
}

// chunk is one streamed chunk of choice 0 with delta.
func (c completion) chunk(delta obj, finish any, withUsage bool) obj {
	ch := obj{
		"id": c.id, "object": "chat.completion.chunk", "created": c.created, "model": c.model,
		"choices": []obj{{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
	}
	if withUsage {
		ch["usage"] = nil
	}
	return ch
}

// stream sends the chunks the real API sends, tool-call arguments split
// across several of them.
func (c completion) stream(s *sse, stall func(), withUsage bool) {
	s.event("", c.chunk(obj{"role": "assistant", "content": ""}, nil, withUsage))
	for _, piece := range chunks(c.rep.text, textChunk) {
		s.event("", c.chunk(obj{"content": piece}, nil, withUsage))
	}
	if c.rep.turn.MidStream {
		typ := cmp.Or(c.rep.turn.ErrorType, "server_error")
		s.event("", obj{"error": obj{"message": "llmtest scripted " + typ, "type": typ, "param": nil, "code": nil}})
		return
	}
	if c.rep.turn.Stall {
		stall()
		return
	}
	for i, tc := range c.rep.calls {
		first := obj{"index": i, "id": tc.ID, "type": "function", "function": obj{"name": tc.Name, "arguments": ""}}
		s.event("", c.chunk(obj{"tool_calls": []obj{first}}, nil, withUsage))
		for _, piece := range chunks(string(tc.Input), jsonChunk) {
			d := obj{"index": i, "function": obj{"arguments": piece}}
			s.event("", c.chunk(obj{"tool_calls": []obj{d}}, nil, withUsage))
		}
	}
	s.event("", c.chunk(obj{}, c.finishReason(), withUsage))
	if withUsage {
		s.event("", obj{"id": c.id, "object": "chat.completion.chunk", "created": c.created,
			"model": c.model, "choices": []obj{}, "usage": c.usage()})
	}
	s.event("", "[DONE]")
}

// openAIError answers an HTTP error in the API's error format.
func openAIError(w http.ResponseWriter, status int, typ, code, msg string, retryAfter time.Duration) {
	setRetryAfter(w.Header(), retryAfter)
	var c any
	if code != "" {
		c = code
	}
	writeJSON(w, status, obj{"error": obj{"message": msg, "type": typ, "param": nil, "code": c}})
}

func openAITypeOf(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "requests"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

func openAIStatusOf(typ string) int {
	switch {
	case typ == "requests" || strings.Contains(typ, "rate_limit"):
		return http.StatusTooManyRequests
	case strings.Contains(typ, "overloaded") || strings.Contains(typ, "unavailable"):
		return http.StatusServiceUnavailable
	case strings.Contains(typ, "invalid_request"):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

func openAICodeOf(status int, model string) (code, msg string) {
	switch status {
	case http.StatusUnauthorized:
		return "invalid_api_key", "Incorrect API key provided"
	case http.StatusNotFound:
		return "model_not_found", fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model)
	case http.StatusTooManyRequests:
		return "rate_limit_exceeded", "Rate limit reached for requests"
	}
	if status >= 500 {
		return "", "The server had an error while processing your request."
	}
	return "", fmt.Sprintf("llmtest scripted error %d", status)
}
