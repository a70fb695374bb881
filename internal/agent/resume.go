package agent

import (
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/store"
)

// Rebuild reconstructs a job's conversation from its event log, so a job
// cut off by a restart goes on where it was: the task, then each step's
// model message followed by its tool results, and what the loop said to
// the model. A step cut off before its results is closed with an error
// result. It returns the conversation and the last step number.
func Rebuild(task string, events []store.Event) ([]llm.Message, int) {
	msgs := []llm.Message{llm.Text(llm.RoleUser, TaskMessage(task))}
	var results []llm.Block
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
			msgs = append(msgs, p.Message)
			steps = max(steps, p.Step)
		case event.ToolResult:
			results = append(results, llm.Block{Type: llm.BlockToolResult, ID: p.ID, Text: p.Text, IsError: p.IsError})
		case event.Notice:
			if p.Said {
				flush()
				msgs = append(msgs, llm.Text(llm.RoleUser, p.Text))
			}
		}
	}
	flush()
	return answerAll(msgs, "interrupted: the server restarted during this step; check the files before repeating it"), steps
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
