package render

import (
	"fmt"
	"io"
	"time"

	"github.com/docker/go-units"
)

// Progress is an io.Writer that counts the bytes written through it and
// reports them on w: redrawn in place on a terminal, a line every few
// seconds otherwise.
type Progress struct {
	w     io.Writer
	label string
	tty   bool
	n     int64
	total int64 // 0: unknown
	last  time.Time
}

// NewProgress returns the progress of what label names, reported on w.
func NewProgress(w io.Writer, label string) *Progress {
	return &Progress{w: w, label: label, tty: isTerminal(w), last: time.Now()}
}

// Write counts b and reports the total when it is time to.
func (p *Progress) Write(b []byte) (int, error) {
	p.n += int64(len(b))
	every := 5 * time.Second
	if p.tty {
		every = 200 * time.Millisecond
	}
	if time.Since(p.last) >= every {
		p.last = time.Now()
		if p.tty {
			fmt.Fprintf(p.w, "\r%s: %s  ", p.label, p.done())
		} else {
			fmt.Fprintf(p.w, "%s: %s\n", p.label, p.done())
		}
	}
	return len(b), nil
}

// SetTotal says how many bytes are to come, so that the report shows
// how far along they are.
func (p *Progress) SetTotal(n int64) { p.total = n }

// done is how many bytes have come, of how many.
func (p *Progress) done() string {
	if p.total <= 0 {
		return units.BytesSize(float64(p.n))
	}
	return fmt.Sprintf("%s of %s (%d%%)", units.BytesSize(float64(p.n)), units.BytesSize(float64(p.total)), min(100, p.n*100/p.total))
}

// Done clears a terminal's progress line.
func (p *Progress) Done() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
