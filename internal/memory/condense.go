package memory

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// maxSummaryCalls bounds the summarizer calls of one Assemble. Steady
// state needs one; a long history seen for the first time (no state) would
// need many, so its oldest part is dropped instead.
const maxSummaryCalls = 4

var (
	errNoSummarizer = errors.New("no summarizer")
	errTooRecent    = errors.New("no step old enough to summarize")
	errEmptySummary = errors.New("summarizer returned nothing")
)

// span is a range of steps, inclusive.
type span struct{ from, to int }

// firstFit returns the smallest x in [lo, hi] with ok(x), or hi if none;
// ok must be monotone (false then true).
func firstFit(lo, hi int, ok func(int) bool) int {
	return lo + sort.Search(hi-lo, func(i int) bool { return ok(lo + i) })
}

// condensedTo is st with steps up to c out of the prompt.
func condensedTo(st State, c int) State {
	st.CondensedSteps = c
	st.MaskedSteps = max(st.MaskedSteps, c)
	return st
}

// recentKept is how many of the last steps are kept whole: KeepRecentTurns,
// or fewer if those steps alone would leave too little room for the task
// and the summary (then condensing them beats dropping them), at least 1.
func (a *assembly) recentKept() int {
	room := a.target - a.m.est.tokens(a.c.full[a.c.head()]) - a.m.cfg.MaxSummaryTokens
	k := min(a.m.cfg.KeepRecentTurns, a.c.steps())
	for k > 1 && a.m.est.tokens(a.c.shown(a.c.steps()-k+1, 0)) > room {
		k--
	}
	return k
}

// mask masks the tool results of the oldest steps, all but the recent
// ones kept whole, until the prompt is down to the target.
func (a *assembly) mask() {
	before := a.st
	lo, limit := max(before.MaskedSteps, before.CondensedSteps)+1, a.c.steps()-a.keep
	if limit < lo {
		return
	}
	a.st.MaskedSteps = firstFit(lo, limit, func(m int) bool {
		st := before
		st.MaskedSteps = m
		return a.tokens(st) <= a.target
	})
	if a.tokens(a.st) < a.tokens(before) {
		a.record(Condensation{Kind: KindMask, FromStep: lo, ToStep: a.st.MaskedSteps}, before)
	}
}

// summarize folds the oldest steps, all but the recent ones kept whole, into
// the summary until the prompt is down to the target (counting the new
// summary at its maximum size). Steps too many for maxSummaryCalls chunks
// are dropped first. On an error the chunks done so far stay done.
func (a *assembly) summarize(ctx context.Context, summarizer Summarizer) error {
	lo, limit := a.st.CondensedSteps+1, a.c.steps()-a.keep
	switch {
	case summarizer == nil:
		return errNoSummarizer
	case limit < lo:
		return errTooRecent
	}
	planned := textSize(len(summaryPrefix)).add(size{fixed: a.m.cfg.MaxSummaryTokens})
	if a.st.DroppedSteps > 0 {
		planned = planned.add(textSize(len(noteText(a.st.DroppedSteps))))
	}
	cut := firstFit(lo, limit, func(c int) bool { return a.tokensWith(condensedTo(a.st, c), planned) <= a.target })
	chunks := a.chunks(lo, cut)
	if n := len(chunks) - maxSummaryCalls; n > 0 {
		a.drop(chunks[n-1].to, "too many steps to summarize at once")
		chunks = chunks[n:]
	}
	for _, ch := range chunks {
		if err := a.summarizeChunk(ctx, summarizer, ch); err != nil {
			return err
		}
	}
	return nil
}

// chunks splits steps from..to into spans the summarizing call can take:
// each at most the budget less the previous summary, or one step.
func (a *assembly) chunks(from, to int) []span {
	limit := max(a.budget-a.m.cfg.MaxSummaryTokens, a.budget/2)
	var out []span
	cur, sum := span{from, from - 1}, size{}
	for s := from; s <= to; s++ {
		ss := a.c.stepSize(s, a.st.MaskedSteps)
		if cur.to >= cur.from && a.m.est.tokens(sum.add(ss)) > limit {
			out = append(out, cur)
			cur, sum = span{s, s - 1}, size{}
		}
		cur.to, sum = s, sum.add(ss)
	}
	return append(out, cur)
}

func (a *assembly) summarizeChunk(ctx context.Context, summarizer Summarizer, ch span) error {
	before := a.st
	turns := a.steps(ch.from, ch.to)
	s, err := summarizer.Summarize(ctx, a.st.Summary, turns, a.m.cfg.MaxSummaryTokens)
	if err != nil {
		return fmt.Errorf("steps %d-%d: %w", ch.from, ch.to, err)
	}
	if strings.TrimSpace(s) == "" {
		return errEmptySummary
	}
	a.st = condensedTo(a.st, ch.to)
	a.st.Summary = a.boundSummary(s)
	a.record(Condensation{Kind: KindSummarize, FromStep: ch.from, ToStep: ch.to}, before)
	return nil
}

// boundSummary cuts s to MaxSummaryTokens, keeping its head and tail.
func (a *assembly) boundSummary(s string) string {
	limit := a.m.cfg.MaxSummaryTokens
	if a.m.est.String(s) <= limit {
		return s
	}
	return cutMiddle(s, a.m.est.bytesFor(limit), func(n int) string {
		return fmt.Sprintf("\n[… %d bytes of the summary cut …]\n", n)
	})
}

// truncate drops the oldest steps, all but the last, until the prompt is
// down to the target.
func (a *assembly) truncate(reason string) {
	lo, last := a.st.CondensedSteps+1, a.c.steps()-1
	if last < lo {
		return
	}
	cut := firstFit(lo, last, func(c int) bool {
		st := condensedTo(a.st, c)
		st.DroppedSteps += c - a.st.CondensedSteps
		return a.tokens(st) <= a.target
	})
	a.drop(cut, reason)
}

// drop takes the steps up to `to` out of the prompt without a summary.
func (a *assembly) drop(to int, reason string) {
	before := a.st
	a.st.DroppedSteps += to - a.st.CondensedSteps
	a.st = condensedTo(a.st, to)
	a.record(Condensation{Kind: KindTruncate, FromStep: before.CondensedSteps + 1, ToStep: to, Reason: reason}, before)
}
