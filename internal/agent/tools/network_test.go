package tools_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/agent/tools"
	"github.com/agentbox/agentbox/internal/event"
)

// fakeDenials stands in for a job's egress proxy: the denials it holds,
// each at its time, and the times it was asked from.
type fakeDenials struct {
	mu    sync.Mutex
	at    []time.Time
	evs   []event.Network
	asked []time.Time
}

func (f *fakeDenials) deny(at time.Time, host string, port int, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.at = append(f.at, at)
	f.evs = append(f.evs, event.Network{Decision: "deny", Host: host, Port: port, Protocol: "connect", Reason: reason})
}

func (f *fakeDenials) Denied(since time.Time) []event.Network {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, since)
	var out []event.Network
	for i, at := range f.at {
		if !at.Before(since) {
			out = append(out, f.evs[i])
		}
	}
	return out
}

// TestBashNetworkDenials: a command that fails while the egress proxy
// refused connections gets, in its result, the distinct hosts refused
// during it (at most five) and why; one that succeeds, one without
// denials during it, or a job without network get nothing added.
func TestBashNetworkDenials(t *testing.T) {
	t.Parallel()
	env, _ := sandboxEnv(t)
	fake := &fakeDenials{}
	start := time.Now()
	fake.deny(start.Add(-time.Minute), "stale.example", 443, "stale.example:443 is not in the job's allow list")
	env.Network = fake

	res := call(t, env, tools.BashTool{}, obj{"command": "exit 7"})
	wantText(t, res, true, "exit code: 7")
	wantNot(t, res, "egress proxy", "stale.example")

	during := time.Now().Add(time.Hour) // after any call's start
	fake.deny(during, "evil.example", 443, "evil.example:443 is not in the job's allow list")
	fake.deny(during, "evil.example", 443, "evil.example:443 is not in the job's allow list")
	fake.deny(during, "10.0.0.1", 80, "private address 10.0.0.1")
	res = call(t, env, tools.BashTool{}, obj{"command": "echo fetching; exit 6"})
	wantText(t, res, true, "<stdout>\nfetching\n</stdout>",
		"The egress proxy refused: evil.example:443 (not in the job's allow list), 10.0.0.1:80 (private address 10.0.0.1).")
	wantNot(t, res, "stale.example")
	if n := strings.Count(res.Text, "evil.example"); n != 1 {
		t.Errorf("evil.example named %d times, want once:\n%s", n, res.Text)
	}
	fake.mu.Lock()
	last := fake.asked[len(fake.asked)-1]
	fake.mu.Unlock()
	if last.Before(start) || last.After(time.Now()) {
		t.Errorf("asked for denials since %v, not the call's start", last)
	}

	res = call(t, env, tools.BashTool{}, obj{"command": "true"})
	wantText(t, res, false, "exit code: 0")
	wantNot(t, res, "egress proxy")

	for _, h := range []string{"a.example", "b.example", "c.example", "d.example", "e.example"} {
		fake.deny(during, h, 443, "denied by "+h)
	}
	res = call(t, env, tools.BashTool{}, obj{"command": "sleep 5", "timeout_seconds": 1})
	wantText(t, res, true, "timed out", "The egress proxy refused: evil.example:443", "c.example:443 (denied by c.example) and 2 more.")
	wantNot(t, res, "d.example", "e.example")

	env.Network = nil
	res = call(t, env, tools.BashTool{}, obj{"command": "exit 1"})
	wantNot(t, res, "egress proxy")
}

// TestRunCodeNetworkDenials: run_code's failed program gets the hint too.
func TestRunCodeNetworkDenials(t *testing.T) {
	t.Parallel()
	env, _ := sandboxEnv(t)
	fake := &fakeDenials{}
	fake.deny(time.Now().Add(time.Hour), "pypi.example", 443, "pypi.example:443 is not in the job's allow list")
	env.Network = fake
	res := call(t, env, tools.RunCodeTool{}, obj{"language": "python", "code": "raise SystemExit(3)"})
	wantText(t, res, true, "exit code: 3", "The egress proxy refused: pypi.example:443 (not in the job's allow list)")
}
