package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/internal/agent/tools"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/memory"
	"github.com/agentbox/agentbox/internal/store"
)

// prompt returns the messages to send: the history as is, or fitted into
// the context budget by the memory manager.
func (l *Loop) prompt(ctx context.Context) ([]llm.Message, error) {
	if l.Memory == nil {
		return l.Messages, nil
	}
	p, st, conds, err := l.Memory.Assemble(ctx, l.Messages, l.MemState, summarizer{l})
	if err != nil {
		return nil, fmt.Errorf("context: %w", err)
	}
	l.MemState = st
	for _, c := range conds {
		l.Emit(event.Condensation{Step: l.Steps, Kind: c.Kind, FromStep: c.FromStep, ToStep: c.ToStep,
			TokensBefore: c.TokensBefore, TokensAfter: c.TokensAfter, Reason: c.Reason, State: st})
	}
	return p.Messages, nil
}

// calibrate tells the estimator how many tokens the provider counted.
func (l *Loop) calibrate(req llm.Request, u llm.Usage) {
	if l.Memory != nil {
		est := l.Memory.Estimator()
		est.Observe(est.Request(req), memory.PromptTokens(u))
	}
}

// index adds a step's text to the recall index.
func (l *Loop) index(kind, text string) {
	if l.Recall != nil && strings.TrimSpace(text) != "" {
		l.Recall.Add(l.Steps, kind, text)
	}
}

// summarizer condenses old steps with the job's own model.
type summarizer struct{ l *Loop }

const summarizerPrompt = `You condense the history of an autonomous coding agent's work so it can go on within its context window.
Write a concise summary of: what was done, what works (verified how), what failed and why, open questions,
and the files touched. Keep exact names, paths, commands and error messages that matter. Plain text only.`

func (s summarizer) Summarize(ctx context.Context, prev string, steps []llm.Message, maxTokens int) (string, error) {
	var b strings.Builder
	if prev != "" {
		b.WriteString("Summary so far:\n" + prev + "\n\n")
	}
	b.WriteString("Steps to add to the summary:\n")
	for _, m := range steps {
		renderMessage(&b, m)
	}
	seq, err := s.l.Model.Stream(ctx, llm.Request{System: summarizerPrompt, MaxTokens: maxTokens,
		Messages: []llm.Message{llm.Text(llm.RoleUser, b.String())}})
	if err != nil {
		return "", err
	}
	resp, err := llm.Collect(seq, nil)
	if err != nil {
		return "", err
	}
	s.l.Usage = s.l.Usage.Add(resp.Usage)
	return resp.Message.PlainText(), nil
}

// renderMessage writes a message as plain text for the summarizer.
func renderMessage(b *strings.Builder, m llm.Message) {
	for _, blk := range m.Content {
		switch blk.Type {
		case llm.BlockText:
			fmt.Fprintf(b, "%s: %s\n", m.Role, blk.Text)
		case llm.BlockToolUse:
			fmt.Fprintf(b, "%s called %s %s\n", m.Role, blk.Name, blk.Input)
		case llm.BlockToolResult:
			status := "result"
			if blk.IsError {
				status = "error"
			}
			fmt.Fprintf(b, "%s: %s\n", status, blk.Text)
		}
	}
}

// recallTool searches the job's whole history, also what no longer fits
// in the prompt.
type recallTool struct{ idx *memory.Index }

var recallSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"query":{"type":"string","description":"keywords to look for (names, error messages, file paths), or 'step N' for all of step N"},` +
	`"max_results":{"type":"integer","minimum":1,"maximum":20,"description":"at most this many matches (default 5)"}},` +
	`"required":["query"],"additionalProperties":false}`)

// stepQuery is a recall of one step by number ("step 12").
var stepQuery = regexp.MustCompile(`^\s*(?i:step)\s+(\d{1,7})\s*$`)

// recallStepBytes caps each entry of a step recalled by number.
const recallStepBytes = 12_000

// step returns what a step did, in full up to a cap per entry.
func (r recallTool) step(num string) (tools.Result, error) {
	n, _ := strconv.Atoi(num)
	hits := r.idx.Step(n, recallStepBytes)
	if len(hits) == 0 {
		return tools.Result{Text: fmt.Sprintf("recall: step %d is not in the history", n)}, nil
	}
	var b strings.Builder
	for _, h := range hits {
		fmt.Fprintf(&b, "step %d (%s):\n%s\n", h.Step, h.Kind, h.Snippet)
	}
	return tools.Result{Text: b.String()}, nil
}

func (recallTool) Spec() llm.Tool {
	return llm.Tool{Name: "recall", InputSchema: recallSchema, Description: "Search the full history of this job " +
		"(every earlier model message and tool output, including those hidden or summarized to save context) by keywords. " +
		"Returns the best matching steps with their step numbers and a snippet. Use it when you need a detail from earlier work."}
}

func (r recallTool) Run(_ context.Context, _ *tools.Env, input json.RawMessage) (tools.Result, error) {
	var in struct {
		Query      string `json:"query"`
		MaxResults int    `json:"max_results"`
	}
	dec := json.NewDecoder(strings.NewReader(string(input)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || strings.TrimSpace(in.Query) == "" {
		return tools.Result{IsError: true, Text: `recall: give {"query": "keywords"} (and optionally "max_results")`}, nil
	}
	k := in.MaxResults
	if k <= 0 || k > 20 {
		k = 5
	}
	if m := stepQuery.FindStringSubmatch(in.Query); m != nil {
		return r.step(m[1])
	}
	hits := r.idx.Search(in.Query, k)
	if len(hits) == 0 {
		return tools.Result{Text: fmt.Sprintf("recall: nothing in the history matches %q", in.Query)}, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "recall: %d matches for %q\n", len(hits), in.Query)
	for _, h := range hits {
		fmt.Fprintf(&b, "step %d (%s): %s\n", h.Step, h.Kind, h.Snippet)
	}
	return tools.Result{Text: b.String()}, nil
}

// IndexHistory fills the recall index from the conversation itself, for a
// loop resumed from saved messages rather than from an event log (agentbox
// chat). Step N is the model's N-th answer, as the memory's stubs count
// steps; recall's own results are left out, as when they were made.
func IndexHistory(l *Loop) {
	if l.Recall == nil {
		return
	}
	step := 0
	var call llm.Message
	for _, m := range l.Messages {
		if m.Role == llm.RoleAssistant {
			step++
			call = m
			var b strings.Builder
			renderMessage(&b, m)
			l.Recall.Add(step, "model", b.String())
			continue
		}
		for _, blk := range m.Content {
			if blk.Type != llm.BlockToolResult || step == 0 || strings.TrimSpace(blk.Text) == "" {
				continue
			}
			if name := callName(call, blk.ID); name != "recall" {
				l.Recall.Add(step, "tool_result "+name, blk.Text)
			}
		}
	}
}

// callName is the tool of the call id among an assistant message's calls.
func callName(call llm.Message, id string) string {
	for _, b := range call.ToolUses() {
		if b.ID == id {
			return b.Name
		}
	}
	return "tool"
}

// restoreMemory picks up a resumed job's condensation state and recall
// index from its event log.
func restoreMemory(l *Loop, events []store.Event) {
	for _, ev := range events {
		p, err := event.Decode(ev.Type, ev.Payload)
		if err != nil {
			continue
		}
		switch p := p.(type) {
		case event.Condensation:
			l.MemState = p.State
		case event.Model:
			var b strings.Builder
			renderMessage(&b, p.Message)
			l.Recall.Add(p.Step, "model", b.String())
		case event.ToolResult:
			l.Recall.Add(p.Step, "tool_result "+p.Name, p.Text)
		}
	}
}
