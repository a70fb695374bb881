package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/llm"
)

// randomStep appends a step of 0-3 tool calls whose outputs are mostly
// small, sometimes large, rarely larger than the window, some with images.
func randomStep(r *rand.Rand, h []llm.Message, s, window int) []llm.Message {
	calls := r.IntN(4)
	out := r.IntN(2000)
	switch r.IntN(10) {
	case 0:
		out = r.IntN(window * 5)
	case 1, 2:
		out = r.IntN(window)
	}
	h = addStep(h, s, calls, out)
	if calls > 0 && r.IntN(15) == 0 {
		last := h[len(h)-1].Content
		last[0].Images = []llm.Image{{MediaType: "image/png", Data: []byte("png")}}
	}
	return h
}

// TestNeverOverBudget grows random histories against random windows and
// checks every prompt: within budget, pairs intact, the task first, the
// estimate honest, and the same as a fresh manager's (the cache is right).
func TestNeverOverBudget(t *testing.T) {
	runs, steps := 100, 150
	if testing.Short() {
		runs = 10
	}
	for run := range runs {
		r := rand.New(rand.NewPCG(uint64(run), 7))
		window := 4000 + r.IntN(196_000)
		cfg := Config{Window: window, KeepRecentTurns: 1 + r.IntN(6)}
		t.Run(fmt.Sprintf("run%d_window%d", run, window), func(t *testing.T) {
			growRandom(t, r, cfg, steps)
		})
	}
	t.Logf("condensations: %v", seen)
}

// seen counts the condensations the random runs made, to show they
// exercise every path.
var seen = map[string]int{}

func growRandom(t *testing.T, r *rand.Rand, cfg Config, steps int) {
	m := newManager(t, cfg)
	sum := &fakeSummarizer{Pad: r.IntN(20_000)}
	h, st := []llm.Message{task()}, State{}
	for s := 1; s <= steps; s++ {
		h = randomStep(r, h, s, cfg.Window)
		sum.Fail = r.IntN(4) == 0
		p, next, cs, err := m.Assemble(context.Background(), h, st, sum)
		if err != nil {
			t.Fatalf("step %d: %v", s, err)
		}
		for _, c := range cs {
			reason, _, _ := strings.Cut(c.Reason, ":")
			seen[c.Kind+" "+reason]++
		}
		checkPrompt(t, m, p)
		if s%17 == 0 {
			fresh, _ := NewManager(cfg, NewEstimator(m.Estimator().Ratio()))
			fp, fst, _, _ := fresh.Assemble(context.Background(), h, st, sum)
			if !reflect.DeepEqual(fp, p) || fst != next {
				t.Fatalf("step %d: a fresh manager assembles another prompt", s)
			}
		}
		st = next
		if s%25 == 0 {
			m.Estimator().Observe(p.Estimate, int64(float64(p.Estimate)*(0.8+r.Float64()*0.6)))
		}
	}
}

// TestDeterministic runs the same growth twice.
func TestDeterministic(t *testing.T) {
	run := func() []any {
		m := newManager(t, testConfig)
		sum := &fakeSummarizer{}
		var out []any
		h, st := []llm.Message{task()}, State{}
		for s := 1; s <= 150; s++ {
			h = addStep(h, s, 1+s%3, (s*7919)%9000)
			sum.Fail = s%40 == 0
			p, next, cs, err := m.Assemble(context.Background(), h, st, sum)
			out = append(out, p, next, cs, err)
			st = next
		}
		return out
	}
	if a, b := run(), run(); !reflect.DeepEqual(a, b) {
		t.Fatal("two runs of the same history differ")
	}
}
