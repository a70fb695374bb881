package agent

import "github.com/agentbox/agentbox/internal/llm"

// CloseDangling answers tool calls left without results (an interrupted
// step), so the conversation can be sent again: providers reject a tool
// call with no result.
func CloseDangling(msgs []llm.Message, why string) []llm.Message {
	if len(msgs) == 0 {
		return msgs
	}
	last := msgs[len(msgs)-1]
	calls := last.ToolUses()
	if last.Role != llm.RoleAssistant || len(calls) == 0 {
		return msgs
	}
	results := make([]llm.Block, len(calls))
	for i, c := range calls {
		results[i] = llm.Block{Type: llm.BlockToolResult, ID: c.ID, Text: why, IsError: true}
	}
	return append(msgs, llm.Message{Role: llm.RoleUser, Content: results})
}
