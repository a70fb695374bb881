package memory

import (
	"math"

	"github.com/agentbox/agentbox/internal/llm"
)

// Estimation constants. Text costs its bytes divided by the ratio; the
// structure around it (roles, block types, IDs) costs fixed tokens, and an
// image costs what a screenshot-sized image costs at Anthropic (≈1,600).
const (
	DefaultRatio = 3.5 // bytes per token of English text and code

	minRatio, maxRatio = 1.0, 8.0
	smoothing          = 0.3 // weight of one observation

	messageOverhead    = 4
	textOverhead       = 2
	toolUseOverhead    = 12
	toolResultOverhead = 8
	imageTokens        = 1600
	toolSpecOverhead   = 8
)

// size is what part of a prompt costs, kept apart from the ratio so it can
// be cached and summed: bytes of text, fixed tokens of structure, and
// images (counted apart, since a prompt keeps only MaxImages of them).
type size struct{ bytes, fixed, images int }

func (a size) add(b size) size {
	return size{a.bytes + b.bytes, a.fixed + b.fixed, a.images + b.images}
}
func (a size) sub(b size) size {
	return size{a.bytes - b.bytes, a.fixed - b.fixed, a.images - b.images}
}

func textSize(n int) size { return size{bytes: n, fixed: textOverhead} }

func blockSize(b llm.Block) size {
	images := len(b.Images)
	switch b.Type {
	case llm.BlockToolUse:
		return size{len(b.ID) + len(b.Name) + len(b.Input), toolUseOverhead, 0}
	case llm.BlockToolResult:
		return size{len(b.ID) + len(b.Text), toolResultOverhead, images}
	case llm.BlockImage:
		return size{0, textOverhead, images}
	}
	return size{len(b.Text), textOverhead, images}
}

func messageSize(m llm.Message) size {
	s := size{fixed: messageOverhead}
	for _, b := range m.Content {
		s = s.add(blockSize(b))
	}
	return s
}

// Estimator estimates tokens from bytes, with a bytes-per-token ratio that
// Observe calibrates against the provider's counts. It is deterministic
// and not safe for concurrent use.
type Estimator struct {
	ratio float64
}

// NewEstimator returns an estimator starting at ratio bytes a token
// (DefaultRatio if 0), for example the Ratio saved before a restart.
func NewEstimator(ratio float64) *Estimator {
	if ratio == 0 {
		ratio = DefaultRatio
	}
	return &Estimator{ratio: clamp(ratio, minRatio, maxRatio)}
}

// Ratio is the current bytes-per-token ratio.
func (e *Estimator) Ratio() float64 { return e.ratio }

func (e *Estimator) tokens(s size) int {
	return int(math.Ceil(float64(s.bytes)/e.ratio)) + s.fixed + s.images*imageTokens
}

// bytesFor is how many bytes of text n tokens hold.
func (e *Estimator) bytesFor(n int) int { return int(float64(n) * e.ratio) }

// String estimates a text.
func (e *Estimator) String(s string) int { return e.tokens(size{bytes: len(s)}) }

// Block estimates one content block.
func (e *Estimator) Block(b llm.Block) int { return e.tokens(blockSize(b)) }

// Message estimates one message.
func (e *Estimator) Message(m llm.Message) int { return e.tokens(messageSize(m)) }

// Messages estimates a conversation. Bytes are summed before rounding, so
// it can be a little less than the sum of Message over msgs.
func (e *Estimator) Messages(msgs []llm.Message) int {
	var s size
	for _, m := range msgs {
		s = s.add(messageSize(m))
	}
	return e.tokens(s)
}

// Request estimates a whole request: system prompt, tools and messages.
// With no messages it is the Overhead of Config.
func (e *Estimator) Request(req llm.Request) int {
	s := size{bytes: len(req.System)}
	for _, t := range req.Tools {
		s = s.add(size{bytes: len(t.Name) + len(t.Description) + len(t.InputSchema), fixed: toolSpecOverhead})
	}
	for _, m := range req.Messages {
		s = s.add(messageSize(m))
	}
	return e.tokens(s)
}

// Observe calibrates the ratio from one call: sentEstimate is what this
// estimator said the request would cost (Request of it) and reported what
// the provider counted (PromptTokens of the usage). One observation moves
// the ratio a fraction of the way, at most a factor of 2, and the ratio
// stays within [1, 8] bytes a token, so one odd count cannot derail it.
func (e *Estimator) Observe(sentEstimate int, reportedInput int64) {
	if sentEstimate <= 0 || reportedInput <= 0 {
		return
	}
	implied := e.ratio * float64(sentEstimate) / float64(reportedInput)
	implied = clamp(implied, e.ratio/2, e.ratio*2)
	e.ratio = clamp(e.ratio+smoothing*(implied-e.ratio), minRatio, maxRatio)
}

// PromptTokens is the prompt's size in u: InputTokens excludes cached
// tokens, which the prompt holds too.
func PromptTokens(u llm.Usage) int64 {
	return u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

func clamp(x, lo, hi float64) float64 {
	return math.Max(lo, math.Min(hi, x))
}
