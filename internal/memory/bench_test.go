package memory

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentbox/agentbox/internal/llm"
)

// benchSummarizer answers at once, so the benchmarks measure Assemble, not
// the model.
type benchSummarizer struct{}

func (benchSummarizer) Summarize(_ context.Context, prev string, turns []llm.Message, _ int) (string, error) {
	return clipTail(prev, 2000) + fmt.Sprintf("\n%d more messages condensed.", len(turns)), nil
}

// A step is about 500 tokens: a short assistant message with one call,
// and a 1,700-byte output.
const benchOut = 1700

type benchCase struct {
	tokens, window int
}

func (c benchCase) String() string {
	return fmt.Sprintf("history=%dk/window=%dk", c.tokens/1000, c.window/1000)
}

var benchCases = []benchCase{{10_000, 16_000}, {100_000, 16_000}, {1_000_000, 16_000}, {1_000_000, 200_000}}

// benchHistory returns a history of steps+extra steps and the number of
// messages of its first steps steps.
func benchHistory(b *testing.B, tokens, extra int) ([]llm.Message, int) {
	e := NewEstimator(0)
	h := []llm.Message{task()}
	for s := 1; e.Messages(h) < tokens; s++ {
		h = addStep(h, s, 1, benchOut)
	}
	n := len(h)
	for s := (n-1)/2 + 1; s <= (n-1)/2+extra; s++ {
		h = addStep(h, s, 1, benchOut)
	}
	return h, n
}

func benchAssemble(b *testing.B, m *Manager, h []llm.Message, st State) State {
	_, next, _, err := m.Assemble(context.Background(), h, st, benchSummarizer{})
	if err != nil {
		b.Fatal(err)
	}
	return next
}

// BenchmarkAssemble measures, for each history size:
//   - steady: one more step on an already condensed history (the loop's
//     every turn), amortized over the condensations that come every few
//     steps;
//   - resume: the first Assemble of a new Manager given the saved state
//     (after a restart: the cache is rebuilt, nothing is summarized again);
//   - cold: the first Assemble of a new Manager with no state (the whole
//     history condensed at once, the summarizer answering instantly).
func BenchmarkAssemble(b *testing.B) {
	for _, c := range benchCases {
		// The history grows by at most a quarter before starting over.
		extra := max(8, c.tokens/500/4)
		h, base := benchHistory(b, c.tokens, extra)
		cfg := Config{Window: c.window}
		b.Run(c.String()+"/steady", func(b *testing.B) {
			var m *Manager
			var st State
			for i := 0; b.Loop(); i++ {
				if i%extra == 0 {
					b.StopTimer()
					m = newManager(b, cfg)
					st = benchAssemble(b, m, h[:base], State{})
					b.StartTimer()
				}
				st = benchAssemble(b, m, h[:base+2*(i%extra+1)], st)
			}
		})
		saved := benchAssemble(b, newManager(b, cfg), h[:base], State{})
		b.Run(c.String()+"/resume", func(b *testing.B) {
			for b.Loop() {
				benchAssemble(b, newManager(b, cfg), h[:base], saved)
			}
		})
		b.Run(c.String()+"/cold", func(b *testing.B) {
			for b.Loop() {
				benchAssemble(b, newManager(b, cfg), h[:base], State{})
			}
		})
	}
}

func BenchmarkIndex(b *testing.B) {
	b.Run("add-2000-steps", func(b *testing.B) {
		for b.Loop() {
			var x Index
			addNoise(&x, 1, 2000)
		}
	})
	var x Index
	addNoise(&x, 1, 2000)
	b.Run("search-2000-steps", func(b *testing.B) {
		for b.Loop() {
			x.Search("staging database password", 5)
		}
	})
}
