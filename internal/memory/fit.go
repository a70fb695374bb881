package memory

import (
	"encoding/json"
	"fmt"

	"github.com/agentbox/agentbox/internal/llm"
)

// minKeep is the least of a text the last resort keeps: a few lines of its
// head and tail.
const minKeep = 256

const imageOmitted = "[image omitted to fit the context window]"

// ref points at a cuttable text in a prompt: a block's text, or a tool
// call's input.
type ref struct {
	msg, block int
	input      bool
}

// fitter cuts a prompt's texts in place, copying a message's blocks before
// it changes the first one, since they are the history's.
type fitter struct {
	msgs  []llm.Message
	owned map[int]bool
	done  map[ref]bool
}

// fit is the last resort, for a prompt over budget with nothing left to
// condense (the task, the summary and the last step): it cuts the summary,
// then the last step's largest tool results, then its other texts and the
// task's, then drops images, until the prompt fits.
func (a *assembly) fit(msgs []llm.Message) ([]llm.Message, int, error) {
	est := a.m.est
	tokens := est.Messages(msgs)
	if tokens <= a.budget {
		return msgs, tokens, nil
	}
	before := tokens
	f := &fitter{msgs: msgs, owned: map[int]bool{}, done: map[ref]bool{}}
	for _, group := range a.cutGroups(msgs) {
		for tokens > a.budget && f.cutLargest(group, est.bytesFor(tokens-a.budget)) {
			tokens = est.Messages(f.msgs)
		}
	}
	if tokens > a.budget {
		f.dropImages()
		tokens = est.Messages(f.msgs)
	}
	step := a.c.steps()
	a.done = append(a.done, Condensation{Kind: KindTruncate, FromStep: step, ToStep: step,
		TokensBefore: before, TokensAfter: tokens, Reason: "cut the largest texts of the last step to fit"})
	if tokens > a.budget {
		return f.msgs, tokens, fmt.Errorf("%w: %d tokens, budget %d", ErrNoFit, tokens, a.budget)
	}
	return f.msgs, tokens, nil
}

// cutGroups lists what fit may cut, in order: the summary and the note
// (after the task's own blocks), the tool results after the task, then
// every other text and tool input.
func (a *assembly) cutGroups(msgs []llm.Message) [][]ref {
	head := a.c.head()
	own := len(a.h[head-1].Content)
	var extras, results, rest []ref
	for i, m := range msgs {
		for j, b := range m.Content {
			r := ref{msg: i, block: j}
			switch {
			case i == head-1 && j >= own:
				extras = append(extras, r)
			case b.Type == llm.BlockToolResult:
				results = append(results, r)
			case b.Type == llm.BlockText:
				rest = append(rest, r)
			case b.Type == llm.BlockToolUse:
				rest = append(rest, ref{msg: i, block: j, input: true})
			}
		}
	}
	return [][]ref{extras, results, rest}
}

func (f *fitter) length(r ref) int {
	b := f.msgs[r.msg].Content[r.block]
	if r.input {
		return len(b.Input)
	}
	return len(b.Text)
}

// cutLargest cuts the largest text of group by about over bytes, keeping
// at least minKeep. It reports false if nothing in group can be cut.
func (f *fitter) cutLargest(group []ref, over int) bool {
	best, bestLen := ref{}, -1
	for _, r := range group {
		if n := f.length(r); !f.done[r] && n > minKeep+len(cutMarker(n)) && n > bestLen {
			best, bestLen = r, n
		}
	}
	if bestLen < 0 {
		return false
	}
	keep := max(bestLen-over-len(cutMarker(bestLen))-16, minKeep)
	f.cut(best, keep)
	if f.length(best) >= bestLen || f.length(best) <= minKeep+len(cutMarker(f.length(best))) {
		f.done[best] = true
	}
	return true
}

func cutMarker(n int) string {
	return fmt.Sprintf("\n[… %d bytes cut to fit the context window; the recall tool has them …]\n", n)
}

func (f *fitter) cut(r ref, keep int) {
	b := f.block(r)
	if !r.input {
		b.Text = cutMiddle(b.Text, keep, cutMarker)
		return
	}
	short, _ := json.Marshal(map[string]string{"truncated_input": cutMiddle(string(b.Input), keep, cutMarker)})
	b.Input = short
}

// block returns the block r points at, in a copy of its message's blocks.
func (f *fitter) block(r ref) *llm.Block {
	if !f.owned[r.msg] {
		m := &f.msgs[r.msg]
		m.Content = append([]llm.Block(nil), m.Content...)
		f.owned[r.msg] = true
	}
	return &f.msgs[r.msg].Content[r.block]
}

// dropImages replaces every image by a line saying it was omitted.
func (f *fitter) dropImages() {
	for i, m := range f.msgs {
		for j, blk := range m.Content {
			if len(blk.Images) == 0 {
				continue
			}
			b := f.block(ref{msg: i, block: j})
			b.Images = nil
			if b.Type == llm.BlockImage {
				*b = llm.Block{Type: llm.BlockText, Text: imageOmitted}
			} else {
				b.Text += "\n" + imageOmitted
			}
		}
	}
}
