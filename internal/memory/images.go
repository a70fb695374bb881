package memory

import (
	"fmt"

	"github.com/agentbox/agentbox/internal/llm"
)

// MaxImages is the most images a prompt carries, whatever the budget:
// screenshots and plots are large and go stale, so only the most recent
// are kept and older ones are replaced by a line naming their step.
const MaxImages = 3

// omittedLen is about the length of the line an omitted image becomes,
// for estimates made before the prompt is built.
const omittedLen = 80

// KeepRecentImages returns msgs with every image but the last keep
// replaced by a line saying which step's image was left out. Messages it
// changes are copies; msgs is not modified. Step N is the N-th assistant
// message with the user messages after it; the messages before the first
// are the task.
func KeepRecentImages(msgs []llm.Message, keep int) []llm.Message {
	return keepRecentImages(msgs, keep, 0)
}

// keepRecentImages is KeepRecentImages of a prompt whose first assistant
// message is step base+1 (the steps before it condensed).
func keepRecentImages(msgs []llm.Message, keep, base int) []llm.Message {
	total := 0
	for _, m := range msgs {
		total += messageSize(m).images
	}
	if total <= keep {
		return msgs
	}
	out := append([]llm.Message(nil), msgs...)
	drop, step := total-keep, base
	for i := 0; i < len(out) && drop > 0; i++ {
		if out[i].Role == llm.RoleAssistant {
			step++
		}
		if messageSize(out[i]).images == 0 {
			continue
		}
		var call llm.Message
		if i > 0 {
			call = out[i-1]
		}
		out[i], drop = omitImages(out[i], drop, step-base > 0, step, call)
	}
	return out
}

// omitImages replaces up to n of m's images, the first ones, and returns
// how many are left to replace. call is the message before m, whose tool
// calls m's results answer; inStep is false for the task's messages.
func omitImages(m llm.Message, n int, inStep bool, step int, call llm.Message) (llm.Message, int) {
	blocks := make([]llm.Block, 0, len(m.Content)+1)
	for _, b := range m.Content {
		k := min(n, len(b.Images))
		if k == 0 {
			blocks = append(blocks, b)
			continue
		}
		n -= k
		line := omittedText(k, inStep, step, toolName(call, b.ID))
		b.Images = b.Images[k:len(b.Images):len(b.Images)]
		if len(b.Images) == 0 {
			b.Images = nil
		}
		switch {
		case b.Type != llm.BlockImage:
			if b.Text != "" {
				line = b.Text + "\n" + line
			}
			b.Text = line
			blocks = append(blocks, b)
		case len(b.Images) == 0:
			blocks = append(blocks, llm.Block{Type: llm.BlockText, Text: line})
		default: // an image block keeps its last images after the line
			blocks = append(blocks, llm.Block{Type: llm.BlockText, Text: line}, b)
		}
	}
	return llm.Message{Role: m.Role, Content: blocks}, n
}

// omittedText is the line k omitted images become.
func omittedText(k int, inStep bool, step int, tool string) string {
	what := "image"
	if tool == "computer" {
		what = "screenshot"
	}
	if k > 1 {
		what = fmt.Sprintf("%d %ss", k, what)
	}
	from := "the task"
	if inStep {
		from = fmt.Sprintf("step %d", step)
	}
	return fmt.Sprintf("[%s from %s omitted: only the %d most recent images are kept]", what, from, MaxImages)
}

// capImages is s with the images a prompt leaves out counted as lines.
func capImages(s size) size {
	if extra := s.images - MaxImages; extra > 0 {
		s.images = MaxImages
		s.bytes += extra * omittedLen
	}
	return s
}
