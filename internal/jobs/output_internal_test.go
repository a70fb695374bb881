package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
)

// emitted records a Run's events.
type emitted struct {
	mu  sync.Mutex
	evs []event.Payload
	at  []time.Time
}

func (e *emitted) emit(_ context.Context, p event.Payload) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, p)
	e.at = append(e.at, time.Now())
}

func (e *emitted) all() []event.Payload {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]event.Payload(nil), e.evs...)
}

// TestOutputBatcher: output after a quiet spell goes out at once; what
// follows within 100ms is held and sent as one event per stream; a
// stream holding 32 KiB goes out at once; flush sends the rest, in order.
func TestOutputBatcher(t *testing.T) {
	var got emitted
	r := &Run{emit: got.emit}
	write, flush := r.Output(context.Background(), "call_1")
	start := time.Now()
	write("stdout", []byte("first\n"))
	if evs := got.all(); len(evs) != 1 || evs[0] != (event.Output{Call: "call_1", Stream: "stdout", Text: "first\n"}) {
		t.Fatalf("the first line was not sent at once: %+v", evs)
	}
	for i := range 50 {
		write("stdout", []byte("line\n"))
		write("stderr", []byte{'a' + byte(i%26)})
	}
	if n := len(got.all()); n != 1 {
		t.Errorf("%d events right after 100 writes; want them held", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(got.all()) < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	evs := got.all()
	if len(evs) != 3 {
		t.Fatalf("%d events after the batch's time; want 3 (first, stdout, stderr): %+v", len(evs), evs)
	}
	if o := evs[1].(event.Output); o.Stream != "stdout" || o.Text != strings.Repeat("line\n", 50) || o.Call != "call_1" {
		t.Errorf("the batched stdout: %+v", o)
	}
	if o := evs[2].(event.Output); o.Stream != "stderr" || len(o.Text) != 50 {
		t.Errorf("the batched stderr: %+v", o)
	}
	if d := got.at[1].Sub(start); d < outputEvery-10*time.Millisecond {
		t.Errorf("the batch went out %v after the first event; want about %v", d, outputEvery)
	}

	// 32 KiB in one stream goes out without waiting.
	big := strings.Repeat("x", outputChunk)
	write("stdout", []byte(big))
	if evs := got.all(); len(evs) != 4 || evs[3].(event.Output).Text != big {
		t.Errorf("a 32 KiB chunk was held")
	}
	write("stderr", []byte("last"))
	flush()
	evs = got.all()
	if o, ok := evs[len(evs)-1].(event.Output); !ok || o.Text != "last" {
		t.Errorf("flush did not send what was held: %+v", evs[len(evs)-1])
	}
	write("stdout", []byte("after"))
	time.Sleep(2 * outputEvery)
	if n := len(got.all()); n != len(evs) {
		t.Errorf("a write after flush was sent")
	}
}

// TestOutputCap: a job stores at most its cap of output events, counting
// what its log already holds; past it, one notice and no more output.
func TestOutputCap(t *testing.T) {
	earlier, _ := json.Marshal(event.Output{Stream: "stdout", Text: strings.Repeat("e", 40)})
	var got emitted
	const limit = 100 + 4*outputEventCost // the earlier event, and the first round's
	r := &Run{emit: got.emit, maxOutput: limit,
		events: func(_ context.Context, after int64, _ int) ([]store.Event, error) {
			if after > 0 {
				return nil, nil
			}
			return []store.Event{{Seq: 1, Type: event.TypeOutput, Payload: earlier}}, nil
		}}
	for i := range 3 {
		write, flush := r.Output(context.Background(), "c")
		write("stdout", []byte(strings.Repeat("ab", 20))) // 40 bytes
		write("stderr", []byte("é"))                      // 2 bytes
		flush()
		_ = i
	}
	var out, notices int
	for _, p := range got.all() {
		switch p := p.(type) {
		case event.Output:
			out += len(p.Text)
			if !utf8Valid(p.Text) {
				t.Errorf("an output event cut a character: %q", p.Text)
			}
		case event.Log:
			notices++
			if !strings.Contains(p.Message, fmt.Sprintf("%d bytes", limit)) {
				t.Errorf("the notice: %q", p.Message)
			}
		}
	}
	if out > 60 || out < 58 {
		t.Errorf("%d bytes of output stored after 40 earlier; want the 60 left of the cap", out)
	}
	if notices != 1 {
		t.Errorf("%d notices; want one", notices)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "?") == s }

// TestOutputCapStoredBytes: the cap bounds what the job's log stores, not
// the bytes before they are encoded: a command writing NULs, other
// control bytes or bytes that are no UTF-8 (each stored as a six-byte
// \u escape) must not make the log hold six times the cap.
func TestOutputCapStoredBytes(t *testing.T) {
	var got emitted
	r := &Run{emit: got.emit, maxOutput: 600}
	write, flush := r.Output(context.Background(), "c")
	for range 10 {
		write("stdout", append(make([]byte, 50), 0xff, 0xfe, '<', '"', 'a'))
	}
	flush()
	stored := 0
	for _, p := range got.all() {
		if o, ok := p.(event.Output); ok {
			b, _ := json.Marshal(o.Text)
			stored += len(b) - 2 + outputEventCost
		}
	}
	if stored > 600 || stored < 500 {
		t.Errorf("the log stores %d bytes of output events (their cost counted) for a cap of 600", stored)
	}
}

// TestOutputCapCountsEvents: a command that writes a byte after each quiet
// spell makes an event of its own for each; the cap counts what each
// event costs the log, not only its text, or a byte every 100 ms for a
// day would store a million events under a cap of a few MiB.
func TestOutputCapCountsEvents(t *testing.T) {
	var got emitted
	r := &Run{emit: got.emit, maxOutput: 20 * outputEventCost}
	for range 100 {
		write, flush := r.Output(context.Background(), "c")
		write("stdout", []byte("x"))
		flush()
	}
	n := 0
	for _, p := range got.all() {
		if _, ok := p.(event.Output); ok {
			n++
		}
	}
	if n > 20 {
		t.Errorf("%d output events stored under a cap of 20 events' cost", n)
	}
}
