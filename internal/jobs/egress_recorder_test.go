package jobs

import (
	"fmt"
	"testing"

	"github.com/agentbox/agentbox/internal/event"
)

// TestNetRecorderFloodOfHosts: a sandbox trying more distinct hosts in a
// second than the recorder holds kinds of gets every attempt counted, the
// ones past the bound together, in a bounded number of events.
func TestNetRecorderFloodOfHosts(t *testing.T) {
	var written []event.Network
	r := newNetRecorder(func(ev event.Network) { written = append(written, ev) })
	const n = netBurst + netPending + 1000
	for i := range n {
		r.record(event.Network{Decision: "deny", Protocol: "connect", Host: fmt.Sprintf("h%d.test", i), Port: 443, BytesOut: 1})
	}
	r.flush()
	if len(written) > netBurst+netPending+2 {
		t.Fatalf("%d events for %d attempts", len(written), n)
	}
	total, out := 0, int64(0)
	for _, ev := range written {
		total += max(ev.Repeats, 1)
		out += ev.BytesOut
	}
	if total != n || out != n {
		t.Fatalf("the events count %d attempts (%d bytes out), want %d: some went unrecorded", total, out, n)
	}
}
