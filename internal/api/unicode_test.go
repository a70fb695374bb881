package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/wire"
)

// TestSubmitRefusesTextThatIsNotUnicode: a body with bytes that are not
// UTF-8, or with an escape of half a surrogate pair, is a 400 on every
// submit route, rather than a job whose task has U+FFFD where the caller's
// text was.
func TestSubmitRefusesTextThatIsNotUnicode(t *testing.T) {
	e := apitest.New(t, api.Config{})
	tests := []struct {
		name, body, want string
	}{
		{"latin-1 byte in task", "{\"task\":\"caf\xe9\"}", "byte 12 (0xe9)"},
		{"stray continuation byte", "{\"task\":\"a\x80b\"}", "not valid UTF-8"},
		{"overlong slash", "{\"task\":\"\xc0\xaf\"}", "not valid UTF-8"},
		{"truncated sequence", "{\"task\":\"\xe2\x82\"}", "not valid UTF-8"},
		{"surrogate encoded as UTF-8", "{\"task\":\"\xed\xa0\x80\"}", "not valid UTF-8"},
		{"bad byte in metadata value", "{\"task\":\"x\",\"metadata\":{\"k\":\"\xff\"}}", "not valid UTF-8"},
		{"bad byte in metadata key", "{\"task\":\"x\",\"metadata\":{\"\xfe\":\"v\"}}", "not valid UTF-8"},
		{"lone low surrogate", `{"task":"a\udc00b"}`, `\udc00 at byte 10`},
		{"lone high surrogate at end", `{"task":"a\ud83d"}`, `\ud83d`},
		{"high surrogate then letter", `{"task":"\ud83dx"}`, "surrogate"},
		{"high surrogate then other escape", `{"task":"\ud83d\u0041"}`, "surrogate"},
		{"high surrogate then high", `{"task":"\ud83d\ud83d\ude00"}`, "surrogate"},
		{"pair reversed", `{"task":"\ude00\ud83d"}`, `\ude00`},
		{"upper-case hex", `{"task":"\uDC00"}`, `\uDC00`},
		{"after an escaped backslash", `{"task":"\\\udc00"}`, "surrogate"},
		{"in metadata", `{"task":"x","metadata":{"k":"\udfff"}}`, "surrogate"},
		{"in model", `{"task":"x","model":"anthropic:\ud800"}`, "surrogate"},
	}
	for _, tt := range tests {
		for _, path := range []string{"/v1/jobs", "/schedule", "/submit"} {
			t.Run(tt.name+" "+path, func(t *testing.T) {
				resp, b := do(t, e, req{method: "POST", path: path, body: tt.body})
				got := wantError(t, resp, b, http.StatusBadRequest, wire.CodeBadRequest)
				if !strings.Contains(got.Message, tt.want) {
					t.Errorf("message %q does not mention %q", got.Message, tt.want)
				}
			})
		}
	}
	if resp, b := do(t, e, req{method: "GET", path: "/v1/jobs"}); len(decode[wire.JobList](t, b).Jobs) != 0 {
		t.Errorf("refused bodies made jobs: %d %s", resp.StatusCode, b)
	}
}

// TestSubmitKeepsUnicodeExactly: what is valid Unicode, however escaped,
// is stored as sent, U+FFFD included.
func TestSubmitKeepsUnicodeExactly(t *testing.T) {
	e := apitest.New(t, api.Config{})
	tests := []struct {
		name, task, want string
	}{
		{"utf-8", "café 😀", "café 😀"},
		{"escaped pair", `\ud83d\ude00`, "😀"},
		{"escaped pair, upper case", `\uD83D\uDE00 ok`, "😀 ok"},
		{"escaped backslash before u", `\\udc00`, `\udc00`},
		{"escaped backslashes and a pair", `\\\\\ud83d\ude00`, `\\😀`},
		{"replacement character", "\uFFFD and \\ufffd", "\uFFFD and \uFFFD"},
		{"last BMP and first astral", `\uffff\ud800\udc00`, "\uffff\U00010000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sr := submit(t, e, `{"task":"`+tt.task+`"}`)
			if got := getJob(t, e, sr.JobID).Task; got != tt.want {
				t.Errorf("task = %q, want %q", got, tt.want)
			}
		})
	}
}
