package agent

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/agent/tools"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/store"
)

// jobLog is a job's event log as drive sees it through its run: the
// loop's events and the user's messages, numbered as the store numbers
// them.
type jobLog struct {
	mu  sync.Mutex
	evs []store.Event
}

func (g *jobLog) add(p event.Payload) int64 {
	typ, b, err := event.Marshal(p)
	if err != nil {
		panic(err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	seq := int64(len(g.evs) + 1)
	g.evs = append(g.evs, store.Event{Seq: seq, Type: typ, Payload: b})
	return seq
}

func (g *jobLog) all() []store.Event {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]store.Event(nil), g.evs...)
}

func (g *jobLog) Report(context.Context, jobs.Progress) error { return nil }

func (g *jobLog) Messages(_ context.Context, after int64) ([]event.Message, int64, error) {
	var msgs []event.Message
	evs := g.all()
	for _, ev := range evs[min(int(after), len(evs)):] {
		if m, ok := event.As[event.Message](ev.Type, ev.Payload); ok {
			msgs = append(msgs, m)
		}
	}
	return msgs, int64(len(evs)), nil
}

// hookTool runs fn when called, as a command the user talks over would.
type hookTool struct {
	name string
	fn   func()
}

func (h hookTool) Spec() llm.Tool {
	return llm.Tool{Name: h.name, Description: h.name, InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)}
}

func (h hookTool) Run(context.Context, *tools.Env, json.RawMessage) (tools.Result, error) {
	h.fn()
	return tools.Result{Text: h.name + " done"}, nil
}

// lastText is the text blocks of a conversation's last message.
func lastText(msgs []llm.Message) []string {
	var out []string
	for _, b := range msgs[len(msgs)-1].Content {
		if b.Type == llm.BlockText {
			out = append(out, b.Text)
		}
	}
	return out
}

// TestSteeringReachesTheModel: a message logged while a tool runs reaches
// the model in the next request, after that step's tool results; one
// logged while the model is being asked waits for the step after; one
// waiting when the model calls finish keeps the job going. Rebuild then
// puts each where the model saw it.
func TestSteeringReachesTheModel(t *testing.T) {
	log := &jobLog{}
	work := hookTool{name: "work", fn: func() { log.add(event.Message{Text: "use tabs", Turn: 1}) }}
	l, fake, _ := newLoop(t, llmtest.Steps(
		llmtest.Call("work", map[string]any{}),
		llmtest.Call("finish", map[string]any{"summary": "first"}),
		llmtest.Call("finish", map[string]any{"summary": "second"}),
	), work)
	l.Emit = func(p event.Payload) { log.add(p) }
	l.Messages = []llm.Message{llm.Text(llm.RoleUser, TaskMessage("the task"))}
	fake.OnRequest(func(r llmtest.Recorded) error {
		if len(fake.Requests()) == 2 { // the model is thinking about step 2
			log.add(event.Message{Text: "and sign it", Turn: 1})
		}
		return nil
	})
	out, err := New(Config{}).drive(context.Background(), log, l, stepLimits{max: 10})
	if err != nil || out.Status != store.StatusComplete || out.Result != "second" {
		t.Fatalf("outcome %+v, %v", out, err)
	}
	reqs := fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	second := reqs[1].Messages
	last := second[len(second)-1].Content
	if len(last) != 2 || last[0].Type != llm.BlockToolResult || last[0].Text != "work done" || last[1].Text != "use tabs" {
		t.Errorf("step 2's request ends with %+v; want the tool result, then the message", last)
	}
	if got := lastText(reqs[2].Messages); len(got) != 1 || got[0] != "and sign it" {
		t.Errorf("step 3's request ends with the texts %q; want the message sent while step 2 was asked", got)
	}
	if out.Seen != int64(len(log.all())) {
		t.Errorf("the outcome says the agent read the log to seq %d; it holds %d events", out.Seen, len(log.all()))
	}
	msgs, steps := Rebuild("the task", log.all())
	if steps != 3 {
		t.Errorf("rebuilt %d steps", steps)
	}
	if got, want := jsonOf(t, msgs), jsonOf(t, l.Messages); got != want {
		t.Errorf("rebuilt conversation differs from the loop's:\n got %s\nwant %s", got, want)
	}
	if err := llmtest.CheckPairs(msgs); err != nil {
		t.Errorf("rebuilt conversation is not sendable: %v", err)
	}
}

// modelStep builds the events of one step: the model's calls, then their
// results, each call's result in place.
func modelStep(step int, seen int64, ids ...string) []event.Payload {
	var calls []llm.Block
	out := []event.Payload{nil}
	for _, id := range ids {
		calls = append(calls, llm.Block{Type: llm.BlockToolUse, ID: id, Name: "bash", Input: []byte(`{}`)})
		out = append(out, event.ToolCall{Step: step, ID: id, Name: "bash"}, event.ToolResult{Step: step, ID: id, Name: "bash", Text: "out " + id})
	}
	out[0] = event.Model{Step: step, Seen: seen, Message: llm.Message{Role: llm.RoleAssistant, Content: calls}}
	return out
}

func numbered(ps ...event.Payload) []store.Event {
	log := &jobLog{}
	for _, p := range ps {
		log.add(p)
	}
	return log.all()
}

func TestRebuildPlacesMessages(t *testing.T) {
	msg := func(text string, turn int) event.Payload { return event.Message{Text: text, Turn: turn} }
	finish := event.Model{Step: 2, Seen: 1, Message: llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{
		{Type: llm.BlockToolUse, ID: "f", Name: "finish", Input: []byte(`{"summary":"s"}`)}}}}
	tests := []struct {
		name string
		log  []event.Payload
		// want is the content of each message after the task: "use:ID",
		// "result:ID", or a user's text.
		want [][]string
	}{{
		name: "mid-step: after the step's results",
		log: concat(
			[]event.Payload{event.State{Status: store.StatusRunning}},
			modelStep(1, 1, "a", "b")[:3], // the call of a and its result, then a message
			[]event.Payload{msg("use tabs", 1)},
			modelStep(1, 1, "a", "b")[3:], // b's call and result
			modelStep(2, 7, "c"),
		),
		want: [][]string{{"use:a", "use:b"}, {"result:a", "result:b", "use tabs"}, {"use:c"}, {"result:c"}},
	}, {
		name: "sent while the model was asked: after that step's results",
		log: concat(
			modelStep(1, 0, "a"),
			[]event.Payload{msg("late", 1)},
			modelStep(2, 3, "b"), // asked before the message came
			modelStep(3, 7, "c"),
		),
		want: [][]string{{"use:a"}, {"result:a"}, {"use:b"}, {"result:b", "late"}, {"use:c"}, {"result:c"}},
	}, {
		name: "after finish: the next turn's follow-up",
		log: []event.Payload{
			event.State{Status: store.StatusRunning}, finish, event.ToolResult{Step: 2, ID: "f", Name: "finish", Text: "finished"},
			event.State{Status: store.StatusComplete}, msg("now add tests", 2), event.State{Status: store.StatusPending},
		},
		want: [][]string{{"use:f"}, {"result:f", "now add tests"}},
	}, {
		name: "several messages, and a step cut off by a restart",
		log: concat(
			modelStep(1, 0, "a", "b")[:3], // b never ran
			[]event.Payload{msg("one", 1), msg("two", 1)},
		),
		want: [][]string{{"use:a", "use:b"}, {"result:a", "result:b", "one", "two"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, _ := Rebuild("the task", numbered(tt.log...))
			if err := llmtest.CheckPairs(msgs); err != nil {
				t.Fatalf("not sendable: %v", err)
			}
			var got [][]string
			for _, m := range msgs[1:] {
				got = append(got, describe(m))
			}
			if jsonOf(t, got) != jsonOf(t, tt.want) {
				t.Errorf("conversation after the task:\n got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestStepsBefore(t *testing.T) {
	evs := numbered(concat(
		modelStep(1, 0, "a"), modelStep(2, 0, "b"),
		[]event.Payload{event.State{Status: store.StatusComplete}, event.Message{Text: "more", Turn: 2},
			event.State{Status: store.StatusPending}, event.State{Status: store.StatusRunning}},
		modelStep(3, 0, "c"),
	)...)
	if n := StepsBefore(evs); n != 2 {
		t.Errorf("steps before the turn: %d, want 2", n)
	}
	if n := StepsBefore(evs[:4]); n != 0 {
		t.Errorf("in the first turn: %d, want 0", n)
	}
}

func concat(parts ...[]event.Payload) []event.Payload {
	var out []event.Payload
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// describe names each block of a message: "use:ID", "result:ID", or its
// text.
func describe(m llm.Message) []string {
	var out []string
	for _, b := range m.Content {
		switch b.Type {
		case llm.BlockToolUse:
			out = append(out, "use:"+b.ID)
		case llm.BlockToolResult:
			out = append(out, "result:"+b.ID)
		default:
			out = append(out, strings.TrimSpace(b.Text))
		}
	}
	return out
}
