package llmtest

import (
	"cmp"
	"fmt"
	"net/http"
	"strings"
	"time"
)

type obj = map[string]any

// serveAnthropic answers POST /v1/messages.
func (s *Server) serveAnthropic(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.malformed(w, formatAnthropic, err)
		return
	}
	key := r.Header.Get("x-api-key")
	if key == "" {
		key = bearer(r)
	}
	if key == "" {
		anthropicError(w, http.StatusUnauthorized, "authentication_error", "x-api-key header is required", 0)
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		s.malformed(w, formatAnthropic, fmt.Errorf("anthropic-version: header is required"))
		return
	}
	req, rec, err := decodeAnthropic(body, betaHeader(r.Header))
	if err != nil {
		s.malformed(w, formatAnthropic, err)
		return
	}
	rec.APIKey, rec.At = key, time.Now()
	turn, ids, status, err := s.admit(rec)
	if err != nil {
		testBug(w, formatAnthropic, status, err)
		return
	}
	s.answerAnthropic(w, r, req, rec, turn, ids)
}

func (s *Server) answerAnthropic(w http.ResponseWriter, r *http.Request, req aRequest, rec Recorded, turn Turn, ids []string) {
	if turn.Status != 0 || (turn.MidStream && !req.Stream) {
		status, typ := turn.Status, turn.ErrorType
		if status == 0 {
			status = anthropicStatusOf(typ)
		}
		if typ == "" {
			typ = anthropicTypeOf(status)
		}
		anthropicError(w, status, typ, anthropicMessageOf(typ, req.Model), turn.RetryAfter)
		return
	}
	rep, err := buildReply(turn, ids, rec)
	if err != nil {
		s.t.Errorf("llmtest: %v", err)
		testBug(w, formatAnthropic, http.StatusInternalServerError, err)
		return
	}
	msgID := s.nextID("msg_llmtest")
	if !req.Stream {
		if turn.Stall {
			s.stall(r)
			return
		}
		writeJSON(w, http.StatusOK, anthropicMessage(msgID, req.Model, rep))
		return
	}
	streamAnthropic(newSSE(w), func() { s.stall(r) }, msgID, req.Model, rep)
}

// anthropicMessage is the non-streamed answer.
func anthropicMessage(id, model string, rep reply) obj {
	content := []obj{}
	if rep.text != "" {
		content = append(content, obj{"type": "text", "text": rep.text})
	}
	for _, c := range rep.calls {
		content = append(content, obj{"type": "tool_use", "id": c.ID, "name": c.Name, "input": c.Input})
	}
	return obj{
		"id": id, "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": rep.stopReason(), "stop_sequence": nil,
		"usage": anthropicUsage(rep, rep.usage.OutputTokens),
	}
}

func anthropicUsage(rep reply, output int64) obj {
	return obj{
		"input_tokens":                rep.usage.InputTokens,
		"cache_creation_input_tokens": rep.usage.CacheWriteTokens,
		"cache_read_input_tokens":     rep.usage.CacheReadTokens,
		"output_tokens":               output,
	}
}

// streamAnthropic sends the event sequence the real API sends; stall
// waits for the client to leave.
func streamAnthropic(s *sse, stall func(), id, model string, rep reply) {
	s.event("message_start", obj{"type": "message_start", "message": obj{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []obj{},
		"stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(rep, 1),
	}})
	index := 0
	if rep.text != "" {
		s.event("content_block_start", obj{"type": "content_block_start", "index": 0, "content_block": obj{"type": "text", "text": ""}})
		s.event("ping", obj{"type": "ping"})
		for _, piece := range chunks(rep.text, textChunk) {
			s.event("content_block_delta", obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "text_delta", "text": piece}})
		}
		s.event("content_block_stop", obj{"type": "content_block_stop", "index": 0})
		index++
	}
	if rep.turn.MidStream {
		typ := cmp.Or(rep.turn.ErrorType, "overloaded_error")
		s.event("error", obj{"type": "error", "error": obj{"type": typ, "message": anthropicMessageOf(typ, model)}})
		return
	}
	if rep.turn.Stall {
		stall()
		return
	}
	for _, c := range rep.calls {
		streamAnthropicCall(s, index, c)
		index++
	}
	s.event("message_delta", obj{"type": "message_delta",
		"delta": obj{"stop_reason": rep.stopReason(), "stop_sequence": nil},
		"usage": anthropicUsage(rep, rep.usage.OutputTokens)})
	s.event("message_stop", obj{"type": "message_stop"})
}

func streamAnthropicCall(s *sse, index int, c replyCall) {
	s.event("content_block_start", obj{"type": "content_block_start", "index": index,
		"content_block": obj{"type": "tool_use", "id": c.ID, "name": c.Name, "input": obj{}}})
	pieces := append([]string{""}, chunks(string(c.Input), jsonChunk)...)
	for _, piece := range pieces {
		s.event("content_block_delta", obj{"type": "content_block_delta", "index": index,
			"delta": obj{"type": "input_json_delta", "partial_json": piece}})
	}
	s.event("content_block_stop", obj{"type": "content_block_stop", "index": index})
}

// anthropicError answers an HTTP error in the API's error format.
func anthropicError(w http.ResponseWriter, status int, typ, msg string, retryAfter time.Duration) {
	setRetryAfter(w.Header(), retryAfter)
	w.Header().Set("request-id", "req_llmtest")
	writeJSON(w, status, obj{"type": "error", "error": obj{"type": typ, "message": msg}, "request_id": "req_llmtest"})
}

var anthropicTypes = map[int]string{
	400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
	404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
	500: "api_error", 529: "overloaded_error",
}

func anthropicTypeOf(status int) string {
	if t, ok := anthropicTypes[status]; ok {
		return t
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

func anthropicStatusOf(typ string) int {
	for status, t := range anthropicTypes {
		if t == typ {
			return status
		}
	}
	return http.StatusInternalServerError
}

func anthropicMessageOf(typ, model string) string {
	switch typ {
	case "not_found_error":
		return "model: " + model
	case "authentication_error":
		return "invalid x-api-key"
	case "rate_limit_error":
		return "Number of request tokens has exceeded your per-minute rate limit"
	case "overloaded_error":
		return "Overloaded"
	case "api_error":
		return "Internal server error"
	}
	return "llmtest scripted " + typ
}

// malformed answers a request the real API would reject, and fails the test.
func (s *Server) malformed(w http.ResponseWriter, format string, err error) {
	s.t.Errorf("llmtest: malformed %s request: %v", format, err)
	testBug(w, format, http.StatusBadRequest, err)
}

// testBug answers an error no client should retry.
func testBug(w http.ResponseWriter, format string, status int, err error) {
	w.Header().Set("x-should-retry", "false")
	msg := "llmtest: " + err.Error()
	if format == formatAnthropic {
		anthropicError(w, status, anthropicTypeOf(status), msg, 0)
		return
	}
	openAIError(w, status, openAITypeOf(status), "", msg, 0)
}

// nextID returns a new unique ID with prefix.
func (s *Server) nextID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counter++
	return fmt.Sprintf("%s%04d", prefix, s.counter)
}

// betaHeader lists the features of the anthropic-beta header: values
// separated by commas, in one header line or several.
func betaHeader(h http.Header) []string {
	var out []string
	for _, v := range h.Values("anthropic-beta") {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				out = append(out, f)
			}
		}
	}
	return out
}
