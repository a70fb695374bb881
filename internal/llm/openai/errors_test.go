package openai_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/llm/openai"
)

// fastRetry is a Retry-After short enough to keep the tests quick.
const fastRetry = 5 * time.Millisecond

func TestRetryAfterHonoured(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			s := llmtest.New(t, llmtest.Steps(
				llmtest.Turn{Status: 429, RetryAfter: time.Second},
				llmtest.Say("after the wait"),
			))
			_, resp := run(t, newModel(t, s, mode.noStream), ask("hi"))
			reqs := s.Requests()
			if len(reqs) != 2 || resp.Message.PlainText() != "after the wait" {
				t.Fatalf("%d requests, answer %q", len(reqs), resp.Message.PlainText())
			}
			if gap := reqs[1].At.Sub(reqs[0].At); gap < 900*time.Millisecond {
				t.Errorf("retried after %v, want the 1s Retry-After honoured", gap)
			}
		})
	}
}

func TestRetryOverloadedAndUnavailable(t *testing.T) {
	s := llmtest.New(t, llmtest.Steps(
		llmtest.Turn{Status: 529, RetryAfter: fastRetry},
		llmtest.Turn{Status: 503, RetryAfter: fastRetry},
		llmtest.Turn{Status: 500, RetryAfter: fastRetry},
		llmtest.Say("finally"),
	))
	_, resp := run(t, newModel(t, s, false), ask("hi"))
	if n := len(s.Requests()); n != 4 || resp.Message.PlainText() != "finally" {
		t.Errorf("%d requests, answer %q", n, resp.Message.PlainText())
	}
}

// streamErr is what Stream returns at once for a scripted failure.
func streamErr(t *testing.T, turn llmtest.Turn, repeat bool, edit ...func(*openai.Config)) (error, *llmtest.Server) {
	t.Helper()
	s := llmtest.New(t, llmtest.Script{Steps: []llmtest.Step{{Branches: []llmtest.Turn{turn}, Repeat: repeat}}})
	seq, err := newModel(t, s, false, edit...).Stream(context.Background(), ask("hi"))
	if err == nil {
		_, err = llm.Collect(seq, nil)
		t.Errorf("Stream did not fail at once (the iterator said %v)", err)
	}
	return err, s
}

func TestErrors(t *testing.T) {
	retries := func(c *openai.Config) { c.MaxRetries = 2 }
	tests := []struct {
		name     string
		turn     llmtest.Turn
		repeat   bool
		want     error
		requests int
		mention  string
	}{
		{"rate limited", llmtest.Turn{Status: 429, RetryAfter: fastRetry}, true, llm.ErrRateLimited, 3, "rate_limit_exceeded"},
		{"no quota", llmtest.Turn{Status: 429, ErrorType: "insufficient_quota", RetryAfter: fastRetry}, true, llm.ErrAuth, 3, "insufficient_quota"},
		{"overloaded", llmtest.Turn{Status: 503, RetryAfter: fastRetry}, true, llm.ErrUnavailable, 3, "503 server_error"},
		{"server error", llmtest.Turn{Status: 500, RetryAfter: fastRetry}, true, llm.ErrUnavailable, 3, "500 server_error"},
		{"refused key", llmtest.Turn{Status: 401}, false, llm.ErrAuth, 1, "Incorrect API key"},
		{"forbidden", llmtest.Turn{Status: 403}, false, llm.ErrAuth, 1, "403"},
		{"unknown model", llmtest.Turn{Status: 404}, false, llm.ErrUnknownModel, 1, `"gpt-test"`},
		{"bad request", llmtest.Turn{Status: 400}, false, llm.ErrBadRequest, 1, "invalid_request_error"},
		{"too large", llmtest.Turn{Status: 413}, false, llm.ErrBadRequest, 1, "413"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err, s := streamErr(t, tt.turn, tt.repeat, retries)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("err = %v; want %v mentioning %q", err, tt.want, tt.mention)
			}
			if n := len(s.Requests()); n != tt.requests {
				t.Errorf("%d requests, want %d", n, tt.requests)
			}
		})
	}
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
	_, resp := run(t, newModel(t, s, false, func(c *openai.Config) { c.APIKey = "" }), ask("hi"))
	if resp.Message.PlainText() != "hi from llama" || s.Requests()[0].APIKey != "" {
		t.Errorf("answer %q, key sent %q", resp.Message.PlainText(), s.Requests()[0].APIKey)
	}
}

// TestRefusedWithoutKey: a server that wants a key says which is missing.
func TestRefusedWithoutKey(t *testing.T) {
	err, _ := streamErr(t, llmtest.Turn{Status: 401}, false, func(c *openai.Config) { c.APIKey = "" })
	if !errors.Is(err, llm.ErrAuth) || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Errorf("err = %v; want ErrAuth naming OPENAI_API_KEY", err)
	}
}

func TestMidStreamError(t *testing.T) {
	tests := []struct {
		typ  string
		want error
	}{
		{"server_error", llm.ErrUnavailable},
		{"overloaded", llm.ErrUnavailable},
		{"requests", llm.ErrRateLimited},
		{"invalid_request_error", llm.ErrBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			s := llmtest.New(t, llmtest.Steps(llmtest.Turn{Text: "partial answer", MidStream: true, ErrorType: tt.typ}))
			seq, err := newModel(t, s, false).Stream(context.Background(), ask("hi"))
			if err != nil {
				t.Fatalf("Stream: %v (the error comes after the response started)", err)
			}
			var text strings.Builder
			_, err = llm.Collect(seq, func(ev llm.Event) { text.WriteString(ev.Text) })
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.typ) {
				t.Errorf("err = %v; want %v", err, tt.want)
			}
			if text.String() != "partial answer" {
				t.Errorf("text before the error %q", text.String())
			}
		})
	}
}

func TestCancelMidStream(t *testing.T) {
	s := llmtest.New(t, llmtest.Steps(llmtest.Turn{Text: "the start", Stall: true}))
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	seq, err := newModel(t, s, false).Stream(ctx, ask("hi"))
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("user pressed ctrl-c")
	var got error
	for ev, err := range seq {
		if ev.Type == llm.EventText {
			cancel(stop)
		}
		if err != nil {
			got = err
		}
	}
	if !errors.Is(got, context.Canceled) || !errors.Is(got, stop) {
		t.Errorf("err = %v; want context.Canceled with its cause", got)
	}
}

// TestCancelBeforeRetry: a cancel ends the wait for a retry. (The SDK does
// not wait at all when Retry-After is over two minutes.)
func TestCancelBeforeRetry(t *testing.T) {
	s := llmtest.New(t, llmtest.Script{Steps: []llmtest.Step{{Branches: []llmtest.Turn{{Status: 429, RetryAfter: time.Minute}}, Repeat: true}}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := newModel(t, s, false).Stream(ctx, ask("hi"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v; want the deadline, not an hour's wait", err)
	}
}

func TestInfo(t *testing.T) {
	s := llmtest.New(t, llmtest.Script{})
	info := newModel(t, s, false).Info()
	if info.Provider != "openai" || info.Name != "gpt-test" || info.ContextWindow != openai.DefaultContextWindow ||
		info.MaxOutputTokens != openai.DefaultMaxOutput || info.NativeComputerUse {
		t.Errorf("info %+v", info)
	}
}
