package llmtest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/llm"
)

const (
	formatAnthropic = "anthropic"
	formatOpenAI    = "openai"
	// maxBody bounds a request body; the real APIs cap theirs too.
	maxBody = 64 << 20
	// textChunk and jsonChunk are the delta sizes, in runes: small enough
	// that every answer is split across several deltas.
	textChunk = 4
	jsonChunk = 7
)

// reply is a turn made concrete for one request.
type reply struct {
	turn  Turn
	text  string
	calls []replyCall
	usage llm.Usage
}

type replyCall struct {
	ID    string
	Name  string
	Input json.RawMessage
}

// buildReply marshals the turn's tool inputs and settles its usage.
func buildReply(t Turn, ids []string, rec Recorded) (reply, error) {
	r := reply{turn: t, text: t.Text}
	out := len(t.Text)
	for i, c := range t.ToolCalls {
		input := c.Input
		if input == nil {
			input = map[string]any{}
		}
		data, err := json.Marshal(input)
		if err != nil || len(data) == 0 || data[0] != '{' {
			return reply{}, fmt.Errorf("tool call %d (%s): input must marshal to a JSON object: %s %v", i, c.Name, data, err)
		}
		r.calls = append(r.calls, replyCall{ID: ids[i], Name: c.Name, Input: data})
		out += len(data)
	}
	if t.Usage != nil {
		r.usage = *t.Usage
	} else {
		r.usage = llm.Usage{InputTokens: max(1, int64(rec.RawBytes/4)), OutputTokens: max(1, int64(out/4))}
	}
	return r, nil
}

// stopReason is the Anthropic stop reason of r.
func (r reply) stopReason() string {
	if len(r.calls) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

// readBody reads a request body, bounded.
func readBody(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if len(data) > maxBody {
		return nil, fmt.Errorf("request body over %d bytes", maxBody)
	}
	return data, nil
}

// sse writes server-sent events and flushes each one.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

// event writes one event; name is empty for data-only events (OpenAI).
func (s *sse) event(name string, data any) {
	var payload []byte
	switch d := data.(type) {
	case string:
		payload = []byte(d)
	default:
		payload, _ = json.Marshal(d)
	}
	if name != "" {
		fmt.Fprintf(s.w, "event: %s\n", name)
	}
	fmt.Fprintf(s.w, "data: %s\n\n", payload)
	if s.f != nil {
		s.f.Flush()
	}
}

// chunks splits s into pieces of at most n runes, never inside a rune.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		i, count := 0, 0
		for i < len(s) && count < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			count++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// setRetryAfter sets the headers the SDKs read for a server-chosen delay.
func setRetryAfter(h http.Header, d time.Duration) {
	if d <= 0 {
		return
	}
	secs := d.Seconds()
	h.Set("Retry-After", strconv.Itoa(int(math.Ceil(secs))))
	if secs != math.Trunc(secs) {
		h.Set("retry-after-ms", strconv.FormatInt(d.Milliseconds(), 10))
	}
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) string {
	v := r.Header.Get("Authorization")
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return ""
}

// stall blocks until the client goes away or the test ends, for a Stall turn.
func (s *Server) stall(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.closing:
	}
}

// validMediaTypes are the image types both APIs accept as base64 data.
var validMediaTypes = map[string]bool{
	"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true,
}

// validToolName reports whether name is a valid function name for both APIs.
func validToolName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, c := range name {
		ok := c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !ok {
			return false
		}
	}
	return true
}

// checkSchema checks a tool's input schema is a JSON Schema object of type object.
func checkSchema(raw json.RawMessage) error {
	var schema map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &schema) != nil || schema == nil {
		return fmt.Errorf("input schema must be a JSON object")
	}
	if schema["type"] != "object" {
		return fmt.Errorf("input schema: type must be \"object\", got %v", schema["type"])
	}
	return nil
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	var v map[string]any
	return json.Unmarshal(raw, &v) == nil && v != nil
}
