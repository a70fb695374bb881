package agent

import (
	"math"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/store"
)

// Rebuild reconstructs a job's conversation from its event log, so a job
// cut off by a restart goes on where it was, and a job continued by a
// follow-up message goes on with everything said so far: the task, then
// each step's model message followed by its tool results, what the loop
// said to the model, and the user's messages. A user's message goes where
// the model was given it: after the tool results of the step before the
// first model event that saw it (event.Model's Seen), so never between a
// tool call and its result; one no model event saw yet goes at the end. A
// step cut off before its results is closed with an error result. It
// returns the conversation and the last step number.
func Rebuild(task string, events []store.Event) ([]llm.Message, int) {
	msgs := []llm.Message{llm.Text(llm.RoleUser, TaskMessage(task))}
	var results []llm.Block
	var waiting []heard
	steps := 0
	flush := func() {
		if len(results) > 0 {
			msgs = append(msgs, llm.Message{Role: llm.RoleUser, Content: results})
			results = nil
		}
	}
	for _, ev := range events {
		p, err := event.Decode(ev.Type, ev.Payload)
		if err != nil {
			continue
		}
		switch p := p.(type) {
		case event.Model:
			flush()
			msgs, waiting = deliver(msgs, waiting, p.Seen)
			msgs = append(msgs, p.Message)
			steps = max(steps, p.Step)
		case event.ToolResult:
			results = append(results, llm.Block{Type: llm.BlockToolResult, ID: p.ID, Text: p.Text, IsError: p.IsError})
		case event.Notice:
			if p.Said {
				flush()
				msgs = append(msgs, llm.Text(llm.RoleUser, p.Text))
			}
		case event.Message:
			waiting = append(waiting, heard{seq: ev.Seq, text: p.Text})
		}
	}
	flush()
	msgs = answerAll(msgs, "interrupted: the server restarted during this step; check the files before repeating it")
	msgs, _ = deliver(msgs, waiting, math.MaxInt64)
	return msgs, steps
}

// heard is a user's message waiting for its place in a rebuilt conversation.
type heard struct {
	seq  int64
	text string
}

// deliver tells the model the waiting messages logged up to seq seen and
// returns those still waiting.
func deliver(msgs []llm.Message, waiting []heard, seen int64) ([]llm.Message, []heard) {
	for len(waiting) > 0 && waiting[0].seq <= seen {
		msgs, waiting = tell(msgs, waiting[0].text), waiting[1:]
	}
	return msgs, waiting
}

// StepsBefore returns the steps of a job's earlier turns: the last step
// its log holds before its latest final state event (a turn ends with one;
// the next starts after it).
func StepsBefore(events []store.Event) int {
	steps, before := 0, 0
	for _, ev := range events {
		if m, ok := event.As[event.Model](ev.Type, ev.Payload); ok {
			steps = max(steps, m.Step)
		} else if st, ok := event.As[event.State](ev.Type, ev.Payload); ok && st.Status.Final() {
			before = steps
		}
	}
	return before
}

// answerAll gives every tool call of the last model message a result: a
// restart may have cut a step after some of its calls were answered.
func answerAll(msgs []llm.Message, why string) []llm.Message {
	n := len(msgs)
	if n >= 2 && msgs[n-1].Role == llm.RoleUser && msgs[n-2].Role == llm.RoleAssistant {
		answered := map[string]bool{}
		for _, b := range msgs[n-1].Content {
			if b.Type == llm.BlockToolResult {
				answered[b.ID] = true
			}
		}
		last := msgs[n-1]
		last.Content = append([]llm.Block(nil), last.Content...)
		for _, c := range msgs[n-2].ToolUses() {
			if !answered[c.ID] {
				last.Content = append(last.Content, llm.Block{Type: llm.BlockToolResult, ID: c.ID, Text: why, IsError: true})
			}
		}
		msgs[n-1] = last
		return msgs
	}
	return CloseDangling(msgs, why)
}
