package render

import (
	"fmt"
	"io"
	"os"
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
	last  time.Time
}

// NewProgress returns the progress of what label names, reported on w.
func NewProgress(w io.Writer, label string) *Progress {
	f, ok := w.(*os.File)
	tty := false
	if ok {
		if fi, err := f.Stat(); err == nil {
			tty = fi.Mode()&os.ModeCharDevice != 0
		}
	}
	return &Progress{w: w, label: label, tty: tty, last: time.Now()}
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
			fmt.Fprintf(p.w, "\r%s: %s  ", p.label, units.BytesSize(float64(p.n)))
		} else {
			fmt.Fprintf(p.w, "%s: %s\n", p.label, units.BytesSize(float64(p.n)))
		}
	}
	return len(b), nil
}

// Done clears a terminal's progress line.
func (p *Progress) Done() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
