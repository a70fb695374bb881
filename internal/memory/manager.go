package memory

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentbox/agentbox/internal/llm"
)

// Manager assembles a job's prompt each turn. It caches what it learned of
// the history, so one Manager serves one job (one history that only grows);
// it is not safe for concurrent use.
type Manager struct {
	cfg   Config
	est   *Estimator
	cache cache
}

// NewManager returns a manager for cfg (defaults applied) estimating with
// est (a new one if nil).
func NewManager(cfg Config, est *Estimator) (*Manager, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if est == nil {
		est = NewEstimator(0)
	}
	return &Manager{cfg: cfg, est: est}, nil
}

// Config is the manager's config, defaults applied.
func (m *Manager) Config() Config { return m.cfg }

// Estimator is the estimator the manager counts with.
func (m *Manager) Estimator() *Estimator { return m.est }

// Assemble builds the prompt for the next call from the whole history
// (which must pair every tool call with its result in the next message,
// and only grow: messages passed before must not change) and the state the
// previous call returned. Under budget the history is sent as it is,
// after the summary of condensed steps if any, except that only the
// MaxImages most recent images are kept (see KeepRecentImages). Over budget it masks old
// tool results, then summarizes the oldest steps with summarizer (nil:
// never), then drops the oldest steps, and finally cuts the last step's
// largest texts, until the prompt fits. It returns the prompt, the state
// to keep, and what it did.
//
// The result is a function of its inputs and the estimator's ratio: the
// same history, state and summaries give the same prompt. An error is
// ErrBadHistory, the context's error if it ended while summarizing, or
// ErrNoFit with the smallest prompt it could make.
func (m *Manager) Assemble(ctx context.Context, history []llm.Message, state State, summarizer Summarizer) (Prompt, State, []Condensation, error) {
	if len(history) == 0 || history[0].Role != llm.RoleUser {
		return Prompt{}, state, nil, ErrBadHistory
	}
	m.cache.update(history)
	a := &assembly{m: m, c: &m.cache, h: history, st: m.clampState(state), budget: m.cfg.Budget()}
	a.target = int(m.cfg.Target * float64(a.budget))
	if err := a.condense(ctx, summarizer); err != nil {
		return Prompt{}, state, a.done, err
	}
	msgs := keepRecentImages(a.build(), MaxImages, a.st.CondensedSteps)
	msgs, tokens, err := a.fit(msgs)
	return Prompt{Messages: msgs, Estimate: tokens}, a.st, a.done, err
}

// clampState makes a state from elsewhere consistent with the history.
func (m *Manager) clampState(st State) State {
	steps := m.cache.steps()
	st.CondensedSteps = min(max(st.CondensedSteps, 0), max(steps-1, 0))
	st.DroppedSteps = min(max(st.DroppedSteps, 0), st.CondensedSteps)
	st.MaskedSteps = min(max(st.MaskedSteps, st.CondensedSteps), steps)
	return st
}

// assembly is one call of Assemble.
type assembly struct {
	m      *Manager
	c      *cache
	h      []llm.Message
	st     State
	budget int
	target int
	keep   int // recent steps never masked nor summarized
	done   []Condensation
}

// condense changes the state until its prompt is within budget, or the
// state cannot shrink further (then fit cuts the last step).
func (a *assembly) condense(ctx context.Context, summarizer Summarizer) error {
	if a.tokens(a.st) <= a.budget {
		return nil
	}
	a.keep = a.recentKept()
	a.mask()
	if a.tokens(a.st) <= a.budget {
		return nil
	}
	reason := "still over budget after summarizing"
	switch err := a.summarize(ctx, summarizer); {
	case err == nil:
	case ctx.Err() != nil:
		return fmt.Errorf("summarize: %w", context.Cause(ctx))
	case errors.Is(err, errNoSummarizer), errors.Is(err, errTooRecent):
		reason = err.Error()
	default:
		reason = "summarizing failed: " + err.Error()
	}
	if a.tokens(a.st) > a.budget {
		a.truncate(reason)
	}
	return nil
}

// tokens estimates the prompt st would give.
func (a *assembly) tokens(st State) int {
	return a.tokensWith(st, extrasSize(st.Summary, st.DroppedSteps))
}

// tokensWith estimates the prompt of st with extras in place of its
// summary and note.
func (a *assembly) tokensWith(st State, extras size) int {
	s := a.c.full[a.c.head()].add(extras).add(a.c.shown(st.CondensedSteps+1, st.MaskedSteps))
	return a.m.est.tokens(capImages(s))
}

func (a *assembly) record(c Condensation, before State) {
	c.TokensBefore, c.TokensAfter = a.tokens(before), a.tokens(a.st)
	a.done = append(a.done, c)
}

// build lays out the prompt of the state: the task (with the summary and
// the note of dropped steps after it), then the steps left, masked up to
// MaskedSteps.
func (a *assembly) build() []llm.Message {
	head := a.c.head()
	from := a.c.start(a.st.CondensedSteps + 1)
	out := make([]llm.Message, 0, head+a.c.n-from)
	out = append(out, a.h[:head]...)
	if extras := extraBlocks(a.st.Summary, a.st.DroppedSteps); len(extras) > 0 {
		last := &out[head-1]
		last.Content = append(append([]llm.Block(nil), last.Content...), extras...)
	}
	for s := a.st.CondensedSteps + 1; s <= a.c.steps(); s++ {
		out = a.appendStep(out, s)
	}
	return out
}

// appendStep appends step s's messages, masked if s is.
func (a *assembly) appendStep(out []llm.Message, s int) []llm.Message {
	i, j := a.c.start(s), a.c.start(s+1)
	if s > a.st.MaskedSteps {
		return append(out, a.h[i:j]...)
	}
	for k := i; k < j; k++ {
		out = append(out, a.c.maskedMessage(a.h, k))
	}
	return out
}

// steps returns the messages of steps from..to as shown.
func (a *assembly) steps(from, to int) []llm.Message {
	var out []llm.Message
	for s := from; s <= to; s++ {
		out = a.appendStep(out, s)
	}
	return out
}

const summaryPrefix = "Summary of earlier work:\n"

func noteText(dropped int) string {
	return fmt.Sprintf("[%d earlier steps were dropped from this context to save space; "+
		"the recall tool finds them by step number or keywords]", dropped)
}

// extraBlocks are the summary and the note of dropped steps.
func extraBlocks(summary string, dropped int) []llm.Block {
	var out []llm.Block
	if summary != "" {
		out = append(out, llm.Block{Type: llm.BlockText, Text: summaryPrefix + summary})
	}
	if dropped > 0 {
		out = append(out, llm.Block{Type: llm.BlockText, Text: noteText(dropped)})
	}
	return out
}

func extrasSize(summary string, dropped int) size {
	var s size
	if summary != "" {
		s = s.add(textSize(len(summaryPrefix) + len(summary)))
	}
	if dropped > 0 {
		s = s.add(textSize(len(noteText(dropped))))
	}
	return s
}
