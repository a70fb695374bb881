package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/agentbox/agentbox/internal/artifact"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
)

// NetworkLogName is the artifacts zip's transcript of a job's connections
// through the egress proxy: one JSON object a line, a network event's
// time and payload.
const NetworkLogName = "network.jsonl"

// The bounds of network.jsonl: a job that tried a connection in a loop
// must not make a zip of gigabytes. What is past them is counted, and the
// zip's manifest says so.
const (
	maxNetworkLines = 200_000
	maxNetworkBytes = 64 << 20
)

// networkExtra is network.jsonl for job id's zip; a job without network
// events has none.
func (s *Service) networkExtra(ctx context.Context, id string) artifact.Extra {
	l := &networkLog{ctx: ctx, maxLines: maxNetworkLines, maxBytes: maxNetworkBytes, events: func(ctx context.Context, after int64) ([]store.Event, error) {
		return s.store.Events(ctx, id, after, 1000)
	}}
	return artifact.Extra{Name: NetworkLogName, Open: l.open, Cut: l.cut}
}

// networkLine is one line of network.jsonl.
type networkLine struct {
	Time time.Time `json:"time"`
	event.Network
}

// networkLog reads a job's network events as JSON lines, a page of its
// log at a time, so that memory holds one page whatever the log's size.
type networkLog struct {
	ctx          context.Context
	events       func(ctx context.Context, after int64) ([]store.Event, error)
	after        int64
	buf          bytes.Buffer
	done         bool
	lines, bytes int64
	left         int64 // network events past the bounds
	// maxLines and maxBytes bound the file (maxNetworkLines and
	// maxNetworkBytes).
	maxLines, maxBytes int64
}

// open reads up to the first network event, and says ErrNoExtra when
// there is none.
func (l *networkLog) open() (io.ReadCloser, error) {
	for l.buf.Len() == 0 && !l.done {
		if err := l.page(); err != nil {
			return nil, fmt.Errorf("network.jsonl: %w", err)
		}
	}
	if l.buf.Len() == 0 && l.left == 0 {
		return nil, artifact.ErrNoExtra
	}
	return io.NopCloser(l), nil
}

func (l *networkLog) Read(p []byte) (int, error) {
	for l.buf.Len() == 0 && !l.done {
		if err := l.page(); err != nil {
			return 0, fmt.Errorf("network.jsonl: %w", err)
		}
	}
	if l.buf.Len() == 0 {
		return 0, io.EOF
	}
	return l.buf.Read(p)
}

// page adds the lines of the next page of the log.
func (l *networkLog) page() error {
	evs, err := l.events(l.ctx, l.after)
	if err != nil || len(evs) == 0 {
		l.done = true
		return err
	}
	l.after = evs[len(evs)-1].Seq
	for _, e := range evs {
		ev, ok := event.As[event.Network](e.Type, e.Payload)
		if !ok {
			continue
		}
		b, err := json.Marshal(networkLine{Time: e.Time.UTC(), Network: ev})
		if err != nil {
			return err
		}
		if l.lines >= l.maxLines || l.bytes+int64(len(b))+1 > l.maxBytes {
			l.left++
			continue
		}
		l.lines++
		l.bytes += int64(len(b)) + 1
		l.buf.Write(b)
		l.buf.WriteByte('\n')
	}
	return nil
}

// cut says how many events were left out past the bounds.
func (l *networkLog) cut() string {
	if l.left == 0 {
		return ""
	}
	return fmt.Sprintf("cut after %d connections (%d bytes): %d more were left out", l.lines, l.bytes, l.left)
}
