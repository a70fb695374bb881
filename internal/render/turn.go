package render

import (
	"fmt"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/llm"
)

// Turn is what one turn of a chat took.
type Turn struct {
	Steps   int
	Usage   llm.Usage // this turn's tokens
	CostUSD float64   // this turn's cost
	// Context is the prompt's size at the turn's last call and Window the
	// model's context window, in tokens (0: unknown).
	Context, Window int64
	Elapsed         time.Duration
	Canceled        bool
}

// TurnLine is a turn's one-line status:
// "─ 3 steps · 12.4k tokens in, 1.2k out · $0.0412 · context 9.8k of 200k (5%) · 14s".
func TurnLine(t Turn) string {
	in := t.Usage.InputTokens + t.Usage.CacheReadTokens + t.Usage.CacheWriteTokens
	line := fmt.Sprintf("─ %d %s · %s tokens in, %s out · $%.4f", t.Steps, plural(t.Steps, "step", "steps"),
		Tokens(in), Tokens(t.Usage.OutputTokens), t.CostUSD)
	if t.Context > 0 {
		line += " · context " + Tokens(t.Context)
		if t.Window > 0 {
			line += fmt.Sprintf(" of %s (%d%%)", Tokens(t.Window), t.Context*100/t.Window)
		}
	}
	line += " · " + Elapsed(t.Elapsed)
	if t.Canceled {
		line += " · canceled"
	}
	return line
}

// Tokens is a token count the short way: 950, 12.4k, 200k, 1.2M.
func Tokens(n int64) string {
	short := func(f float64, unit string) string {
		return strings.TrimSuffix(fmt.Sprintf("%.1f", f), ".0") + unit
	}
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 999_950:
		return short(float64(n)/1e3, "k")
	default:
		return short(float64(n)/1e6, "M")
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
