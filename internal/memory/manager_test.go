package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/llm"
)

// testConfig: a 16k window, a budget of 8,000 tokens, a target of 4,800.
var testConfig = Config{Window: 16000, ReserveOutput: 2000, MaxSummaryTokens: 500, ReserveSummary: 2000}

func newManager(t testing.TB, cfg Config) *Manager {
	t.Helper()
	m, err := NewManager(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAssembleStages(t *testing.T) {
	huge := addStep(history(3, 3500), 4, 2, 200_000)
	tests := []struct {
		name    string
		history []llm.Message
		sum     *fakeSummarizer
		kinds   []string
		want    []string // substrings of the prompt
	}{
		{"task only", []llm.Message{task()}, &fakeSummarizer{}, nil, nil},
		{"under budget", history(5, 1000), &fakeSummarizer{}, nil, nil},
		{"masks old outputs", history(20, 3500), &fakeSummarizer{}, []string{KindMask},
			[]string{"[output of bash call call_3_0 at step 3 hidden to save context; use the recall tool with step 3 or keywords to see it]"}},
		{"masks then summarizes", history(200, 3500), &fakeSummarizer{}, []string{KindMask, KindSummarize},
			[]string{"Summary of earlier work:\n"}},
		{"failing summarizer truncates", history(200, 3500), &fakeSummarizer{Fail: true}, []string{KindMask, KindTruncate},
			[]string{"earlier steps were dropped from this context"}},
		{"no summarizer truncates", history(200, 3500), nil, []string{KindMask, KindTruncate},
			[]string{"earlier steps were dropped from this context"}},
		{"recent steps too big are masked, not dropped", history(10, 12000), &fakeSummarizer{}, []string{KindMask},
			[]string{"call_9_0 at step 9 hidden"}},
		{"last step too big is cut", huge, &fakeSummarizer{}, []string{KindMask, KindSummarize, KindTruncate},
			[]string{"bytes cut to fit the context window"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newManager(t, testConfig)
			var sum Summarizer
			if tt.sum != nil {
				sum = tt.sum
			}
			p, st, cs, err := m.Assemble(context.Background(), tt.history, State{}, sum)
			if err != nil {
				t.Fatal(err)
			}
			checkPrompt(t, m, p)
			if got := slices.Compact(kinds(cs)); !reflect.DeepEqual(got, tt.kinds) {
				t.Fatalf("condensations %v, want %v: %+v", got, tt.kinds, cs)
			}
			if tt.kinds == nil && (!reflect.DeepEqual(p.Messages, tt.history) || st != (State{})) {
				t.Fatalf("under budget, the prompt or state changed: %+v", st)
			}
			text := dump(p.Messages)
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("prompt lacks %q", w)
				}
			}
			checkRecentKept(t, m, tt.history, p)
		})
	}
}

// checkRecentKept asserts the last KeepRecentTurns steps (or what is left
// of them after a truncation) are sent as they are.
func checkRecentKept(t *testing.T, m *Manager, h []llm.Message, p Prompt) {
	t.Helper()
	if len(h) < 2 || strings.Contains(dump(p.Messages), "bytes cut to fit") {
		return
	}
	n := min(2*m.Config().KeepRecentTurns, len(p.Messages)-1)
	if m.Estimator().Messages(h[len(h)-n:]) > m.Config().Budget() {
		n = 2 // only the last step is sure to be kept whole
	}
	if !reflect.DeepEqual(p.Messages[len(p.Messages)-n:], h[len(h)-n:]) {
		t.Fatalf("the last %d messages were changed", n)
	}
}

func dump(msgs []llm.Message) string {
	b, _ := json.Marshal(msgs)
	return strings.ReplaceAll(string(b), `\n`, "\n")
}

func TestMaskingKeepsPairsAndErrors(t *testing.T) {
	m := newManager(t, testConfig)
	h := []llm.Message{task()}
	for s := 1; s <= 20; s++ {
		h = addStep(h, s, 2, 1000)
	}
	p, _, _, err := m.Assemble(context.Background(), h, State{}, &fakeSummarizer{})
	if err != nil {
		t.Fatal(err)
	}
	checkPrompt(t, m, p)
	masked := 0
	for i, msg := range p.Messages {
		for j, b := range msg.Content {
			if b.Type == llm.BlockToolResult && strings.HasPrefix(b.Text, "[output of bash call ") {
				masked++
				if orig := findResult(h, b.ID); orig.IsError != b.IsError {
					t.Fatalf("messages.%d.content.%d: is_error lost", i, j)
				}
			}
		}
	}
	if masked == 0 {
		t.Fatal("nothing masked")
	}
}

func findResult(h []llm.Message, id string) llm.Block {
	for _, m := range h {
		for _, b := range m.Content {
			if b.Type == llm.BlockToolResult && b.ID == id {
				return b
			}
		}
	}
	return llm.Block{}
}

func TestSummaryBounded(t *testing.T) {
	m := newManager(t, testConfig)
	sum := &fakeSummarizer{Pad: 100_000}
	p, st, _, err := m.Assemble(context.Background(), history(200, 3500), State{}, sum)
	if err != nil {
		t.Fatal(err)
	}
	checkPrompt(t, m, p)
	if sum.Calls == 0 || st.Summary == "" {
		t.Fatalf("no summary: %+v", st)
	}
	if got, limit := m.Estimator().String(st.Summary), m.Config().MaxSummaryTokens; got > limit {
		t.Fatalf("summary of %d tokens, limit %d", got, limit)
	}
}

// TestSteadyState grows a history step by step, as the loop does: the
// summarizer is called every few steps, not every step, and the state
// round-trips through JSON.
func TestSteadyState(t *testing.T) {
	m := newManager(t, testConfig)
	sum := &fakeSummarizer{}
	h, st := []llm.Message{task()}, State{}
	for s := 1; s <= 300; s++ {
		h = addStep(h, s, 1, 2500)
		p, next, _, err := m.Assemble(context.Background(), h, st, sum)
		if err != nil {
			t.Fatal(err)
		}
		checkPrompt(t, m, p)
		st = roundTrip(t, next)
	}
	if sum.Calls == 0 || sum.Calls > 300/4 {
		t.Fatalf("summarizer called %d times in 300 steps", sum.Calls)
	}
}

func roundTrip(t *testing.T, st State) State {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var out State
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

type cancelSummarizer struct{ cancel context.CancelFunc }

func (c cancelSummarizer) Summarize(ctx context.Context, _ string, _ []llm.Message, _ int) (string, error) {
	c.cancel()
	return "", ctx.Err()
}

func TestCancelWhileSummarizing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m := newManager(t, testConfig)
	_, _, _, err := m.Assemble(ctx, history(200, 3500), State{}, cancelSummarizer{cancel})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestBadInput(t *testing.T) {
	m := newManager(t, testConfig)
	for _, h := range [][]llm.Message{nil, {llm.Text(llm.RoleAssistant, "hi")}} {
		if _, _, _, err := m.Assemble(context.Background(), h, State{}, nil); !errors.Is(err, ErrBadHistory) {
			t.Errorf("history %v: err = %v", h, err)
		}
	}
	for _, cfg := range []Config{{}, {Window: 1000, ReserveOutput: 900}, {Window: 16000, Threshold: 2}} {
		if _, err := NewManager(cfg, nil); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
}

func TestDefaults(t *testing.T) {
	c := Config{Window: 200_000}.WithDefaults()
	want := Config{Window: 200_000, ReserveOutput: 8192, ReserveSummary: 2000, Threshold: 0.75, Target: 0.6,
		KeepRecentTurns: 4, MaxSummaryTokens: 2000}
	if c != want {
		t.Fatalf("defaults %+v, want %+v", c, want)
	}
	if got := c.Budget(); got != 150_000-8192-2000 {
		t.Fatalf("budget %d", got)
	}
}

// TestLongSession is the loop's shape over 2,000 steps against a 16k
// window: outputs up to 40 KB, spilled at 8 KB, a summarizer that fails one
// time in ten. Every prompt fits, and condensing is occasional.
func TestLongSession(t *testing.T) {
	m := newManager(t, Config{Window: 16_000})
	sum := &fakeSummarizer{}
	h, st := []llm.Message{task()}, State{}
	conds := 0
	for s := 1; s <= 2000; s++ {
		h = addStep(h, s, 1+s%2, (s*7919)%40_000)
		for i, b := range h[len(h)-1].Content {
			h[len(h)-1].Content[i].Text, _ = Spill(b.Text, 8000, fmt.Sprintf("/workspace/.out/%s.txt", b.ID))
		}
		sum.Fail = s%10 == 0
		p, next, cs, err := m.Assemble(context.Background(), h, st, sum)
		if err != nil {
			t.Fatalf("step %d: %v", s, err)
		}
		checkPrompt(t, m, p)
		st, conds = next, conds+len(cs)
	}
	t.Logf("%d condensations, %d summarizer calls, state %+v", conds, sum.Calls, st.CondensedSteps)
	if sum.Calls > 2000/3 {
		t.Fatalf("summarizer called %d times in 2,000 steps", sum.Calls)
	}
}
