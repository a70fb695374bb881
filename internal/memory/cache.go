package memory

import (
	"fmt"

	"github.com/agentbox/agentbox/internal/llm"
)

// cache holds what Assemble needs to know of the history without looking
// at it again: where each step starts and prefix sums of every message's
// size, as is and with its tool results masked. The history only grows, so
// each turn adds its new messages and the sum over any range of steps is
// two lookups.
type cache struct {
	n      int
	last   *llm.Block          // &history[n-1].Content[0], to notice another history
	full   []size              // full[i] is the size of history[:i]
	masked []size              // the same with tool results masked
	masks  map[int]llm.Message // the masked form of messages masking changes
	starts []int               // starts[s-1] is the index of step s's assistant message
}

// update brings the cache up to history, starting over if it is not the
// history the cache was built from.
func (c *cache) update(history []llm.Message) {
	if len(history) < c.n || (c.n > 0 && firstBlock(history[c.n-1]) != c.last) {
		*c = cache{}
	}
	if c.full == nil {
		c.full, c.masked, c.masks = []size{{}}, []size{{}}, map[int]llm.Message{}
	}
	for i := c.n; i < len(history); i++ {
		m := history[i]
		if m.Role == llm.RoleAssistant {
			c.starts = append(c.starts, i)
		}
		full := messageSize(m)
		masked := full
		if step := len(c.starts); step > 0 && m.Role == llm.RoleUser {
			if mm := maskMessage(m, step, history[c.starts[step-1]]); firstBlock(mm) != firstBlock(m) {
				c.masks[i] = mm
				masked = messageSize(mm)
			}
		}
		c.full = append(c.full, c.full[i].add(full))
		c.masked = append(c.masked, c.masked[i].add(masked))
	}
	c.n = len(history)
	c.last = firstBlock(history[c.n-1])
}

func firstBlock(m llm.Message) *llm.Block {
	if len(m.Content) == 0 {
		return nil
	}
	return &m.Content[0]
}

// steps is how many steps the history has.
func (c *cache) steps() int { return len(c.starts) }

// head is the end of the messages before step 1: the task.
func (c *cache) head() int { return c.start(1) }

// start is the index of step s's first message (n past the last step).
func (c *cache) start(s int) int {
	if s-1 < len(c.starts) {
		return c.starts[s-1]
	}
	return c.n
}

// shown is the size of steps from..n as shown when steps up to masked are
// masked.
func (c *cache) shown(from, masked int) size {
	i, j := c.start(from), c.start(max(masked, from-1)+1)
	return c.masked[j].sub(c.masked[i]).add(c.full[c.n].sub(c.full[j]))
}

// maskedMessage is history[i] (of a masked step) as shown.
func (c *cache) maskedMessage(history []llm.Message, i int) llm.Message {
	if m, ok := c.masks[i]; ok {
		return m
	}
	return history[i]
}

// stepSize is the size of step s as shown.
func (c *cache) stepSize(s, masked int) size {
	i, j := c.start(s), c.start(s+1)
	if s <= masked {
		return c.masked[j].sub(c.masked[i])
	}
	return c.full[j].sub(c.full[i])
}

// maskMessage returns m with its tool results replaced by stubs, or m
// itself if it has none worth masking. call is the step's assistant
// message, which names the tools.
func maskMessage(m llm.Message, step int, call llm.Message) llm.Message {
	var out []llm.Block
	for i, b := range m.Content {
		if b.Type != llm.BlockToolResult {
			continue
		}
		stub := stubText(toolName(call, b.ID), b.ID, step)
		if len(b.Text) <= len(stub) && len(b.Images) == 0 {
			continue
		}
		if out == nil {
			out = append([]llm.Block(nil), m.Content...)
		}
		out[i] = llm.Block{Type: llm.BlockToolResult, ID: b.ID, Text: stub, IsError: b.IsError}
	}
	if out == nil {
		return m
	}
	return llm.Message{Role: m.Role, Content: out}
}

func stubText(tool, id string, step int) string {
	return fmt.Sprintf("[output of %s call %s at step %d hidden to save context; use the recall tool with step %d or keywords to see it]",
		tool, id, step, step)
}

func toolName(call llm.Message, id string) string {
	for _, b := range call.Content {
		if b.Type == llm.BlockToolUse && b.ID == id {
			return b.Name
		}
	}
	return "tool"
}
