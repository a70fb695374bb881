package memory

import (
	"math"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/llm"
)

// fakeTokenizer counts like a provider whose tokens are bytesPerToken
// bytes of text, with its own overheads per message and per request.
func fakeTokenizer(req llm.Request, bytesPerToken float64) int64 {
	bytes := len(req.System)
	for _, m := range req.Messages {
		for _, b := range m.Content {
			bytes += len(b.Text) + len(b.Input) + len(b.Name)
		}
	}
	return int64(float64(bytes)/bytesPerToken) + int64(7*len(req.Messages)) + 20
}

func TestEstimatorConverges(t *testing.T) {
	for _, real := range []float64{1.8, 2.6, 3.5, 4.2, 6.0} {
		e := NewEstimator(0)
		var req llm.Request
		req.System = "You are an agent."
		for s := 1; s <= 40; s++ {
			req.Messages = addStep(req.Messages, s, 1, 500+s*37%900)
			e.Observe(e.Request(req), fakeTokenizer(req, real))
		}
		got, want := float64(e.Request(req)), float64(fakeTokenizer(req, real))
		if math.Abs(got-want)/want > 0.03 {
			t.Errorf("real %g bytes/token: estimate %g, actual %g (ratio %.2f)", real, got, want, e.Ratio())
		}
	}
}

func TestObserveBounded(t *testing.T) {
	e := NewEstimator(0)
	e.Observe(1000, 1) // absurd: would mean 3,500 bytes a token
	if r := e.Ratio(); r > DefaultRatio*2 {
		t.Fatalf("one observation moved the ratio to %g", r)
	}
	for range 100 {
		e.Observe(1000, 1)
	}
	if r := e.Ratio(); r != maxRatio {
		t.Fatalf("ratio %g, want the bound %g", r, maxRatio)
	}
	for range 100 {
		e.Observe(1, 1_000_000)
	}
	if r := e.Ratio(); r != minRatio {
		t.Fatalf("ratio %g, want the bound %g", r, minRatio)
	}
	e.Observe(0, 10)
	e.Observe(10, 0)
	if r := e.Ratio(); r != minRatio {
		t.Fatalf("empty observations moved the ratio to %g", r)
	}
}

func TestEstimates(t *testing.T) {
	e := NewEstimator(0)
	text := strings.Repeat("x", 3500)
	tests := []struct {
		name string
		got  int
		want int
	}{
		{"string", e.String(text), 1000},
		{"text block", e.Block(llm.Block{Type: llm.BlockText, Text: text}), 1000 + textOverhead},
		{"image", e.Block(llm.Block{Type: llm.BlockImage, Images: make([]llm.Image, 1)}), imageTokens + textOverhead},
		{"message", e.Message(llm.Text(llm.RoleUser, text)), 1000 + textOverhead + messageOverhead},
		{"usage", int(PromptTokens(llm.Usage{InputTokens: 10, CacheReadTokens: 100, CacheWriteTokens: 5, OutputTokens: 7})), 115},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, tt.got, tt.want)
		}
	}
}
