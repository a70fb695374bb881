// Package capped is a buffer that keeps the first bytes written to it
// and drops the rest: for the error output of a command the host runs
// over what a sandbox wrote (cp, chmod over its tree; QEMU about its
// guest), which can be made to print without end.
package capped

import (
	"bytes"
	"sync"
)

// DefaultMax is what a Buffer with no Max keeps: 8 KiB.
const DefaultMax = 8 << 10

// Buffer keeps at most Max bytes (DefaultMax if 0) of what is written to
// it; Write never fails, so a command writing to it never blocks on it.
// It is safe for concurrent use (os/exec copies a command's stdout and
// stderr from two goroutines). The bytes.Buffer is a field, not embedded:
// an embedded one's ReadFrom would be promoted, and io.Copy (as os/exec
// uses) would then fill it without bound, past Write.
type Buffer struct {
	Max int
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	max := b.Max
	if max <= 0 {
		max = DefaultMax
	}
	if room := max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Len is how many bytes it keeps.
func (b *Buffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// String is what it keeps.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
