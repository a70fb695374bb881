package jobs

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/event"
)

// outputEventCost is what an output event costs the job's log besides
// its text: its record and its JSON's fields. The cap counts it, or a
// byte written after each quiet spell would make an event of its own
// that the cap hardly saw.
const outputEventCost = 64

// Output batching: at most one output event per outputEvery, unless a
// stream holds outputChunk bytes.
const (
	outputEvery = 100 * time.Millisecond
	outputChunk = 32 << 10
)

// Output returns where a command's output goes as it is produced, into the
// job's log as output events naming call (the agent's tool call; "" for
// the shell agent's script), batched by an outputBatcher; and flush, which
// emits what is still held and must be called once the command has ended,
// before its result is emitted. The bytes of output events a job stores
// are capped (SchedulerConfig.MaxOutputEvents): past the cap, one log
// event says so and output is no longer logged.
func (r *Run) Output(ctx context.Context, call string) (write func(stream string, p []byte), flush func()) {
	ctx = context.WithoutCancel(ctx)
	b := newOutputBatcher(func(stream string, text []byte) {
		kept, notice := r.outputBudget().take(ctx, r, text)
		if len(kept) > 0 {
			r.Emit(ctx, event.Output{Call: call, Stream: stream, Text: string(kept)})
		}
		if notice != "" {
			r.Emit(ctx, event.Log{Level: "info", Message: notice})
		}
	})
	return b.write, b.close
}

// outputBudget is the run's share of its job's output cap, made on first use.
func (r *Run) outputBudget() *outputBudget {
	r.budgetOnce.Do(func() { r.budget = &outputBudget{max: r.maxOutput} })
	return r.budget
}

// outputBudget counts the bytes of output events a job has stored, those
// of its earlier attempts and turns too (read from its log once).
type outputBudget struct {
	mu      sync.Mutex
	max     int64
	used    int64
	loaded  bool
	noticed bool
}

// take returns what of p may still be logged, and the notice to log once
// the cap is reached ("" otherwise).
func (b *outputBudget) take(ctx context.Context, r *Run, p []byte) ([]byte, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	limit := b.max
	if limit <= 0 {
		limit = config.Default().Server.LiveOutputMax // AGENTBOX_LIVE_OUTPUT_MAX
	}
	if !b.loaded {
		b.loaded = true
		b.used = loggedOutput(ctx, r)
		b.noticed = b.used >= limit
	}
	left := limit - b.used - outputEventCost
	size := storedSize(p, -1)
	if size.cost <= left {
		b.used += outputEventCost + size.cost
		return p, ""
	}
	size = storedSize(p, max(left, 0)) // whole characters only
	keep := p[:size.n]
	if len(keep) > 0 {
		b.used += outputEventCost + size.cost
	}
	if b.noticed {
		return keep, ""
	}
	b.noticed = true
	return keep, fmt.Sprintf("this job's commands have written more than %s of output: the rest is not shown as it runs (each step's result still has its output)", sizeText(limit))
}

// loggedOutput adds up the output events already in the job's log.
func loggedOutput(ctx context.Context, r *Run) int64 {
	var n int64
	var after int64
	for r.events != nil {
		evs, err := r.events(ctx, after, 5000)
		if err != nil || len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			if o, ok := event.As[event.Output](ev.Type, ev.Payload); ok {
				n += outputEventCost + storedSize([]byte(o.Text), -1).cost
			}
		}
		after = evs[len(evs)-1].Seq
	}
	return n
}

// stored is how much of some output storedSize takes: n bytes of it,
// which cost the log cost bytes.
type stored struct {
	n    int
	cost int64
}

// storedSize measures p as the job's log stores it, in JSON: a control
// byte, a byte that is no UTF-8, <, > and & each take six bytes (a \u
// escape), a quote or a backslash two. It takes whole characters of p
// while they cost at most limit (all of p when limit < 0).
func storedSize(p []byte, limit int64) stored {
	var s stored
	for s.n < len(p) {
		r, w := utf8.DecodeRune(p[s.n:])
		c := int64(w)
		switch {
		case r == utf8.RuneError && w == 1, r < 0x20 && r != '\n' && r != '\t' && r != '\r',
			r == '<' || r == '>' || r == '&', r == '\u2028' || r == '\u2029':
			c = 6
		case r == '"' || r == '\\' || r == '\n' || r == '\t' || r == '\r':
			c = 2
		}
		if limit >= 0 && s.cost+c > limit {
			break
		}
		s.n += w
		s.cost += c
	}
	return s
}

func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// outputBatcher turns a command's output chunks into output events, at most
// one per outputEvery, or sooner when a stream holds outputChunk bytes, so
// a chatty command does not cost one durable write per line. Output after
// a quiet spell goes out at once: a line a second shows as it is written.
type outputBatcher struct {
	emit func(stream string, p []byte)

	mu     sync.Mutex // held while emitting, so events keep their order
	buf    [2][]byte  // stdout, stderr
	last   time.Time  // of the last emit
	timer  *time.Timer
	closed bool
}

var streams = [2]string{"stdout", "stderr"}

func newOutputBatcher(emit func(stream string, p []byte)) *outputBatcher {
	return &outputBatcher{emit: emit}
}

func (b *outputBatcher) write(stream string, p []byte) {
	i := 0
	if stream == "stderr" {
		i = 1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.buf[i] = append(b.buf[i], p...)
	wait := outputEvery - time.Since(b.last)
	switch {
	case len(b.buf[i]) >= outputChunk || wait <= 0:
		b.flushLocked()
	case b.timer == nil:
		b.timer = time.AfterFunc(wait, b.tick)
	}
}

func (b *outputBatcher) tick() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.timer = nil
	if !b.closed {
		b.flushLocked()
	}
}

// flushLocked emits what is held; b.mu is held.
func (b *outputBatcher) flushLocked() {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	for i, p := range b.buf {
		if len(p) > 0 {
			b.emit(streams[i], p)
			b.buf[i] = nil
			b.last = time.Now()
		}
	}
}

// close emits what is held; later writes are dropped.
func (b *outputBatcher) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
	b.closed = true
}
