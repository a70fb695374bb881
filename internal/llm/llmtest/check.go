package llmtest

import (
	"fmt"

	"github.com/agentbox/agentbox/internal/llm"
)

// CheckPairs reports the first broken tool-call pairing in msgs: every
// tool_use must be answered by a tool_result with its ID in the very next
// message, which is a user message, and every tool_result must answer a
// tool_use of the message just before it, once. Both APIs reject a prompt
// that breaks this, so a context manager that drops or reorders messages
// must keep it.
func CheckPairs(msgs []llm.Message) error {
	var pending map[string]bool // tool_use IDs the current message must answer
	for i, m := range msgs {
		answered := map[string]bool{}
		for j, b := range m.Content {
			if b.Type != llm.BlockToolResult {
				continue
			}
			if m.Role != llm.RoleUser {
				return fmt.Errorf("messages.%d.content.%d: tool_result in a %s message", i, j, m.Role)
			}
			if !pending[b.ID] {
				return fmt.Errorf("messages.%d.content.%d: tool_result %q answers no tool_use of the previous message", i, j, b.ID)
			}
			if answered[b.ID] {
				return fmt.Errorf("messages.%d.content.%d: tool_use %q answered twice", i, j, b.ID)
			}
			answered[b.ID] = true
		}
		for id := range pending {
			if !answered[id] {
				return fmt.Errorf("messages.%d: tool_use %q of the previous message has no tool_result here", i, id)
			}
		}
		next, err := toolUseIDs(i, m)
		if err != nil {
			return err
		}
		pending = next
	}
	return nil
}

// toolUseIDs returns the IDs of msg's tool calls, which must be unique.
func toolUseIDs(i int, m llm.Message) (map[string]bool, error) {
	ids := map[string]bool{}
	for j, b := range m.Content {
		if b.Type != llm.BlockToolUse {
			continue
		}
		if m.Role != llm.RoleAssistant {
			return nil, fmt.Errorf("messages.%d.content.%d: tool_use in a %s message", i, j, m.Role)
		}
		if b.ID == "" || ids[b.ID] {
			return nil, fmt.Errorf("messages.%d.content.%d: tool_use ID %q empty or repeated", i, j, b.ID)
		}
		ids[b.ID] = true
	}
	return ids, nil
}

// checkResultsFirst enforces the Anthropic rule that a message answering
// tool calls begins with its tool_result blocks.
func checkResultsFirst(msgs []llm.Message) error {
	for i, m := range msgs {
		other := false
		for j, b := range m.Content {
			if b.Type != llm.BlockToolResult {
				other = true
				continue
			}
			if other {
				return fmt.Errorf("messages.%d.content.%d: messages following tool_use blocks must begin with their tool_result blocks", i, j)
			}
		}
	}
	return nil
}
