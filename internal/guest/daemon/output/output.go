// Package output owns the caps on what a command (or a kernel) writes: a
// Capture keeps the head and the tail of a stream within a limit, a Stream
// forwards the first bytes of a live stream and drops the rest, each saying
// where it cut.
package output

import (
	"fmt"
	"sync"
)

// Capture keeps a stream's output up to a cap: all of it when it fits, else
// the head and the tail with a marker line between them, so the model sees
// both how a command started and how it ended. It is safe for concurrent use,
// and stops recording once detached (the command's result has been taken).
type Capture struct {
	mu       sync.Mutex
	half     int
	head     []byte
	tail     []byte
	total    int64
	detached bool
}

// NewCapture returns a Capture of at most about limit bytes.
func NewCapture(limit int64) *Capture {
	h := int(limit / 2)
	if h < 1 {
		h = 1
	}
	return &Capture{half: h}
}

// Write records p (nothing once the result is taken); it never fails.
func (c *Capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.detached {
		return len(p), nil
	}
	c.total += int64(len(p))
	rest := p
	if n := c.half - len(c.head); n > 0 {
		n = min(n, len(rest))
		c.head = append(c.head, rest[:n]...)
		rest = rest[n:]
	}
	if len(rest) == 0 {
		return len(p), nil
	}
	c.tail = append(c.tail, rest...)
	if len(c.tail) > 2*c.half { // compact now and then, not on every write
		c.tail = append(c.tail[:0:0], c.tail[len(c.tail)-c.half:]...)
	}
	return len(p), nil
}

// Result returns the captured bytes, their total count and whether they were cut.
func (c *Capture) Result() ([]byte, int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.detached = true
	tail := c.tail
	if len(tail) > c.half {
		tail = tail[len(tail)-c.half:]
	}
	kept := int64(len(c.head) + len(tail))
	out := make([]byte, 0, kept+80)
	out = append(out, c.head...)
	cut := c.total > kept
	if cut {
		out = fmt.Appendf(out, "\n[agentbox: %d bytes of output omitted here; %d bytes in all]\n", c.total-kept, c.total)
	}
	return append(out, tail...), c.total, cut
}

// Stream forwards at most limit bytes of a stream and counts the rest,
// adding one marker line where it starts dropping. It is safe for
// concurrent use.
type Stream struct {
	mu      sync.Mutex
	limit   int64
	total   int64
	forward func([]byte)
}

// NewStream returns a Stream that passes at most limit bytes to forward.
func NewStream(limit int64, forward func([]byte)) *Stream {
	return &Stream{limit: limit, forward: forward}
}

// Write forwards what of p is within the limit; it never fails.
func (l *Stream) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	before := l.total
	l.total += int64(len(p))
	if before >= l.limit {
		return len(p), nil
	}
	n := min(int64(len(p)), l.limit-before)
	l.forward(p[:n])
	if l.total > l.limit {
		l.forward(fmt.Appendf(nil, "\n[agentbox: output capped at %d bytes; the rest is dropped]\n", l.limit))
	}
	return len(p), nil
}

// Count returns the bytes written in all and whether some were dropped.
func (l *Stream) Count() (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.total > l.limit
}
