package providertest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

func testRetryAfterHonoured(t *testing.T, p Provider) {
	eachMode(t, func(t *testing.T, noStream bool) {
		s := llmtest.New(t, llmtest.Steps(
			llmtest.Turn{Status: 429, RetryAfter: time.Second},
			llmtest.Say("after the wait"),
		))
		_, resp := Collect(t, p.Open(t, s, Options{NoStream: noStream}), Ask("hi"))
		reqs := s.Requests()
		if len(reqs) != 2 || resp.Message.PlainText() != "after the wait" {
			t.Fatalf("%d requests, answer %q", len(reqs), resp.Message.PlainText())
		}
		if gap := reqs[1].At.Sub(reqs[0].At); gap < 900*time.Millisecond {
			t.Errorf("retried after %v, want the 1s Retry-After honoured", gap)
		}
	})
}

func testRetryOverloadedAndUnavailable(t *testing.T, p Provider) {
	s := llmtest.New(t, llmtest.Steps(
		llmtest.Turn{Status: 529, RetryAfter: FastRetry},
		llmtest.Turn{Status: 503, RetryAfter: FastRetry},
		llmtest.Turn{Status: 500, RetryAfter: FastRetry},
		llmtest.Say("finally"),
	))
	_, resp := Collect(t, p.Open(t, s, Options{}), Ask("hi"))
	if n := len(s.Requests()); n != 4 || resp.Message.PlainText() != "finally" {
		t.Errorf("%d requests, answer %q", n, resp.Message.PlainText())
	}
}

func testErrors(t *testing.T, p Provider) {
	if len(p.Errors) == 0 {
		t.Fatal("the provider lists no error cases")
	}
	for _, tt := range p.Errors {
		t.Run(tt.Name, func(t *testing.T) {
			s := llmtest.New(t, llmtest.Script{Steps: []llmtest.Step{{Branches: []llmtest.Turn{tt.Turn}, Repeat: tt.Repeat}}})
			err := StreamErr(t, p.Open(t, s, Options{MaxRetries: 2}))
			if !errors.Is(err, tt.Want) || !strings.Contains(err.Error(), tt.Mention) {
				t.Errorf("err = %v; want %v mentioning %q", err, tt.Want, tt.Mention)
			}
			if n := len(s.Requests()); n != tt.Requests {
				t.Errorf("%d requests, want %d", n, tt.Requests)
			}
		})
	}
}

func testMidStreamError(t *testing.T, p Provider) {
	if len(p.MidStreamErrors) == 0 {
		t.Fatal("the provider lists no mid-stream errors")
	}
	for _, tt := range p.MidStreamErrors {
		t.Run(tt.ErrorType, func(t *testing.T) {
			s := llmtest.New(t, llmtest.Steps(llmtest.Turn{Text: "partial answer", MidStream: true, ErrorType: tt.ErrorType}))
			seq, err := p.Open(t, s, Options{}).Stream(context.Background(), Ask("hi"))
			if err != nil {
				t.Fatalf("Stream: %v (the error comes after the response started)", err)
			}
			var text strings.Builder
			_, err = llm.Collect(seq, func(ev llm.Event) { text.WriteString(ev.Text) })
			if !errors.Is(err, tt.Want) || !strings.Contains(err.Error(), tt.ErrorType) {
				t.Errorf("err = %v; want %v", err, tt.Want)
			}
			if text.String() != "partial answer" {
				t.Errorf("text before the error %q", text.String())
			}
		})
	}
}

func testCancelMidStream(t *testing.T, p Provider) {
	s := llmtest.New(t, llmtest.Steps(llmtest.Turn{Text: "the start", Stall: true}))
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	seq, err := p.Open(t, s, Options{}).Stream(ctx, Ask("hi"))
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

// testCancelBeforeRetry: a cancel ends the wait for a retry.
func testCancelBeforeRetry(t *testing.T, p Provider) {
	if p.LongRetryAfter <= 0 {
		t.Fatal("the provider sets no LongRetryAfter")
	}
	s := llmtest.New(t, llmtest.Script{Steps: []llmtest.Step{{Branches: []llmtest.Turn{{Status: 429, RetryAfter: p.LongRetryAfter}}, Repeat: true}}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := p.Open(t, s, Options{}).Stream(ctx, Ask("hi"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v; want the deadline, not a %v wait", err, p.LongRetryAfter)
	}
}
