// Package memory owns what the model sees of a long job. The full history
// stays with the caller (and in the store); each turn a Manager assembles the
// prompt from it within a token budget: old tool outputs are masked first,
// then the oldest turns are folded into a running summary, and if that fails
// the oldest turns are dropped, so a job never dead-ends on its own context.
// The package also estimates tokens (an Estimator calibrated against the
// provider's counts), cuts oversized outputs to head and tail (Spill), and
// indexes the history for the recall tool (Index, BM25).
//
// Nothing here is durable: the caller persists State next to the history and
// hands it back on the next turn, or after a restart.
package memory

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/agentbox/agentbox/internal/llm"
)

// Errors of Assemble; check them with errors.Is.
var (
	// ErrBadHistory means the history is empty or does not start with a
	// user message.
	ErrBadHistory = errors.New("memory: history must start with a user message")
	// ErrNoFit means even the task and the last turn, cut as far as they
	// can be, are over the budget; the prompt returned with it is the
	// smallest Assemble could make.
	ErrNoFit = errors.New("memory: prompt does not fit the budget")
)

// minBudget is the smallest budget Validate accepts: room for a task, a
// turn cut to head and tail, and the stubs.
const minBudget = 256

// Config sizes the prompt. Zero values take the defaults.
type Config struct {
	// Window is the model's context window in tokens. Required.
	Window int `json:"window"`
	// ReserveOutput is room left for the model's answer
	// (default min(Window/8, 8192)).
	ReserveOutput int `json:"reserve_output,omitempty"`
	// ReserveSummary is room left so the summarizing call (the previous
	// summary, a chunk of turns and the new summary) fits the window too
	// (default MaxSummaryTokens).
	ReserveSummary int `json:"reserve_summary,omitempty"`
	// Threshold is the fraction of the window the prompt may fill before
	// it is condensed (default 0.75).
	Threshold float64 `json:"threshold,omitempty"`
	// Target is the fraction of the budget a condensation brings the
	// prompt down to, so that condensing (and invalidating the provider's
	// prompt cache) happens every few turns, not every turn (default 0.6).
	Target float64 `json:"target,omitempty"`
	// KeepRecentTurns is how many of the latest turns are never masked nor
	// summarized (default 4).
	KeepRecentTurns int `json:"keep_recent_turns,omitempty"`
	// MaxSummaryTokens bounds the running summary (default
	// min(2000, Window/8)).
	MaxSummaryTokens int `json:"max_summary_tokens,omitempty"`
	// Overhead is what the request costs besides its messages: the system
	// prompt and the tool definitions (Estimator.Request of a request
	// without messages). It is taken off the budget.
	Overhead int `json:"overhead,omitempty"`
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	if c.MaxSummaryTokens == 0 {
		c.MaxSummaryTokens = min(2000, c.Window/8)
	}
	if c.ReserveOutput == 0 {
		c.ReserveOutput = min(8192, c.Window/8)
	}
	if c.ReserveSummary == 0 {
		c.ReserveSummary = c.MaxSummaryTokens
	}
	if c.Threshold == 0 {
		c.Threshold = 0.75
	}
	if c.Target == 0 {
		c.Target = 0.6
	}
	if c.KeepRecentTurns == 0 {
		c.KeepRecentTurns = 4
	}
	return c
}

// Budget is the most tokens the assembled messages may take:
//
//	floor(Threshold × Window) − ReserveOutput − ReserveSummary − Overhead
func (c Config) Budget() int {
	return int(math.Floor(c.Threshold*float64(c.Window))) - c.ReserveOutput - c.ReserveSummary - c.Overhead
}

// Validate reports a config (with defaults applied) that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Window <= 0:
		return fmt.Errorf("memory: window must be positive, got %d", c.Window)
	case c.Threshold <= 0 || c.Threshold > 1:
		return fmt.Errorf("memory: threshold must be in (0, 1], got %g", c.Threshold)
	case c.Target <= 0 || c.Target > 1:
		return fmt.Errorf("memory: target must be in (0, 1], got %g", c.Target)
	case c.KeepRecentTurns < 1:
		return fmt.Errorf("memory: keep_recent_turns must be at least 1, got %d", c.KeepRecentTurns)
	case c.MaxSummaryTokens < 1 || c.ReserveOutput < 0 || c.ReserveSummary < 0 || c.Overhead < 0:
		return fmt.Errorf("memory: reserves must not be negative")
	case c.Budget() < minBudget:
		return fmt.Errorf("memory: budget %d tokens (window %d) is under %d", c.Budget(), c.Window, minBudget)
	}
	return nil
}

// State is what condensation has done so far, persisted by the caller
// between turns (it is plain JSON). Steps are numbered from 1: step N is
// the N-th assistant message of the history with the user messages after
// it (its tool results), which is the loop's step counter.
type State struct {
	// Summary is the running summary of the condensed steps.
	Summary string `json:"summary,omitempty"`
	// CondensedSteps: steps 1..CondensedSteps are out of the prompt, folded
	// into Summary or dropped.
	CondensedSteps int `json:"condensed_steps"`
	// DroppedSteps is how many of the condensed steps were dropped without
	// being summarized.
	DroppedSteps int `json:"dropped_steps"`
	// MaskedSteps: the tool results of steps up to MaskedSteps are shown
	// as one-line stubs.
	MaskedSteps int `json:"masked_steps"`
}

// Kinds of Condensation.
const (
	KindMask      = "mask"
	KindSummarize = "summarize"
	KindTruncate  = "truncate"
)

// Condensation is one thing Assemble did to fit the budget, for the caller
// to record as an event.
type Condensation struct {
	Kind string `json:"kind"`
	// FromStep and ToStep are the steps affected (inclusive).
	FromStep int `json:"from_step"`
	ToStep   int `json:"to_step"`
	// TokensBefore and TokensAfter are the prompt's estimate around it.
	TokensBefore int `json:"tokens_before"`
	TokensAfter  int `json:"tokens_after"`
	// Reason says why a truncation happened.
	Reason string `json:"reason,omitempty"`
}

// Prompt is the assembled conversation to send.
type Prompt struct {
	// Messages share blocks with the history; do not modify them.
	Messages []llm.Message
	// Estimate is Messages' size by the Manager's Estimator.
	Estimate int
}

// Summarizer folds turns into a running summary (the loop implements it
// with the model). It must answer within maxTokens; a longer answer is cut.
// Turns are whole steps, as the model last saw them (stubs included): they
// begin with an assistant message and keep their tool call pairs, so a
// summarizer sending them to a model puts a user message before them.
type Summarizer interface {
	Summarize(ctx context.Context, previousSummary string, turns []llm.Message, maxTokens int) (string, error)
}
