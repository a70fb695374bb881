package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/artifact"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
)

// pagedLog is a job's log of n events, every third a network event, read
// a page at a time as the store gives it.
func pagedLog(n int) func(ctx context.Context, after int64) ([]store.Event, error) {
	return func(ctx context.Context, after int64) ([]store.Event, error) {
		var evs []store.Event
		for seq := after + 1; seq <= int64(n) && len(evs) < 7; seq++ {
			typ, payload := "output", json.RawMessage(`{"stream":"stdout","text":"x"}`)
			if seq%3 == 0 {
				typ = event.TypeNetwork
				payload, _ = json.Marshal(event.Network{Decision: "deny", Host: fmt.Sprintf("h%d.example", seq), Port: 443})
			}
			evs = append(evs, store.Event{Seq: seq, Type: typ, Payload: payload, Time: time.Unix(seq, 0)})
		}
		return evs, nil
	}
}

// TestNetworkLogBounds: network.jsonl holds the network events only, each
// with its time, across pages of the log; past its bounds the rest are
// counted and the manifest's note says how many; a log without network
// events gives no file at all.
func TestNetworkLogBounds(t *testing.T) {
	l := &networkLog{ctx: context.Background(), events: pagedLog(40), maxLines: 5, maxBytes: 1 << 20}
	rc, err := l.open()
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], `{"time":"1970-01-01T00:00:03Z","bytes_in":0,`) || !strings.Contains(lines[4], `"host":"h15.example"`) {
		t.Errorf("network.jsonl:\n%s", b)
	}
	if got, want := l.cut(), "cut after 5 connections"; !strings.HasPrefix(got, want) || !strings.HasSuffix(got, ": 8 more were left out") {
		t.Errorf("cut = %q", got)
	}

	l = &networkLog{ctx: context.Background(), events: pagedLog(40), maxLines: 100, maxBytes: 300}
	rc, _ = l.open()
	b, _ = io.ReadAll(rc)
	if len(b) > 300 || l.left == 0 || l.lines+l.left != 13 {
		t.Errorf("bytes bound: %d bytes, %d lines, %d left", len(b), l.lines, l.left)
	}

	l = &networkLog{ctx: context.Background(), events: pagedLog(2), maxLines: 5, maxBytes: 1 << 20}
	if _, err := l.open(); !errors.Is(err, artifact.ErrNoExtra) {
		t.Errorf("open without network events: %v, want ErrNoExtra", err)
	}
	if l.cut() != "" {
		t.Errorf("cut = %q", l.cut())
	}
}

// TestNetRecorderFloodHidesNothing: past its rate the recorder holds one
// summary per host, port and decision, at most netPending of them. A
// sandbox that tries more names than that in a second must not make the
// attempts past them vanish: its one allowed connection (the one that
// matters, an upload to a host of its choice in mode open) among a flood
// of refused names is in the transcript with its bytes, and every other
// attempt is counted.
func TestNetRecorderFloodHidesNothing(t *testing.T) {
	var got []event.Network
	r := newNetRecorder(func(ev event.Network) { got = append(got, ev) })
	r.tokens, r.last = 0, time.Now().Add(time.Hour) // no token left for a while
	const flood = 3 * netPending
	for i := range flood {
		r.record(event.Network{Host: fmt.Sprintf("junk%d.example", i), Port: 443, Decision: "deny", Reason: "mode none"})
	}
	r.record(event.Network{Host: "drop.example", Port: 443, Decision: "allow", BytesOut: 5 << 20})
	r.record(event.Network{Host: "drop2.example", Port: 443, Decision: "allow", BytesOut: 1 << 20})
	r.flush()
	if len(got) > netPending+2 {
		t.Errorf("%d events for one second's flood, want at most %d", len(got), netPending+2)
	}
	attempts, allowed := 0, int64(0)
	seen := map[string]bool{}
	for _, ev := range got {
		attempts += max(1, ev.Repeats)
		seen[ev.Host] = true
		if ev.Decision == "allow" {
			allowed += ev.BytesOut
		}
	}
	if !seen["drop.example"] || !seen["drop2.example"] || allowed != 6<<20 {
		t.Errorf("allowed connections missing from the transcript: %d bytes out recorded, hosts %v", allowed, len(seen))
	}
	if attempts != flood+2 {
		t.Errorf("%d attempts recorded, want %d", attempts, flood+2)
	}
}
