package guest

import (
	"fmt"
	"sync"
)

// capture keeps a stream's output up to a cap: all of it when it fits, else
// the head and the tail with a marker line between them, so the model sees
// both how a command started and how it ended. It is safe for concurrent use,
// and stops recording once detached (the command's result has been taken).
type capture struct {
	mu       sync.Mutex
	half     int
	head     []byte
	tail     []byte
	total    int64
	detached bool
}

func newCapture(limit int64) *capture {
	h := int(limit / 2)
	if h < 1 {
		h = 1
	}
	return &capture{half: h}
}

func (c *capture) Write(p []byte) (int, error) {
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

// result returns the captured bytes, their total count and whether they were cut.
func (c *capture) result() ([]byte, int64, bool) {
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

// limitStream forwards at most limit bytes of a stream and counts the rest,
// adding one marker line where it starts dropping.
type limitStream struct {
	mu      sync.Mutex
	limit   int64
	total   int64
	forward func([]byte)
}

func (l *limitStream) Write(p []byte) (int, error) {
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

func (l *limitStream) count() (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.total > l.limit
}
