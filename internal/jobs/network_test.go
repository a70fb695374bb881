package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/workspace"
)

// netService is a service without a scheduler or driver, with presets
// python and secrets github, mode open forbidden.
func netService(t *testing.T) (*jobs.Service, store.Store) {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(bg, filepath.Join(dir, "agentbox.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pypi, _ := egress.ParseRule("pypi.org")
	svc := newService(t, jobs.ServiceConfig{Store: st, Workspaces: workspace.NewLocal(dir), Egress: &egress.Config{Presets: map[string][]egress.Rule{"python": {pypi}},
		Secrets: map[string]egress.Secret{"github": {Hosts: []string{"api.github.com"}, Header: "Authorization: Bearer {value}", Env: "GH_TOKEN"}},
		Modes:   []string{"none", "allow"}}})
	return svc, st
}

// as is a context whose calls are made by the principal named name.
func as(name string) context.Context { return jobs.WithPrincipal(bg, jobs.Principal{Name: name}) }

func policy(t *testing.T, s string) egress.Policy {
	t.Helper()
	var p egress.Policy
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSubmitNetwork: the job records its policy as checked; each bad one
// is refused naming its field.
func TestSubmitNetwork(t *testing.T) {
	svc, _ := netService(t)
	j, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: "t", Network: policy(t, `{"allow": ["x.example"], "presets": ["python"], "secrets": ["github"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got := jobs.JobNetwork(j); got.Mode != "allow" || got.Allow[0].Host != "x.example" || got.Presets[0] != "python" {
		t.Errorf("recorded %s", j.Network)
	}
	j, _, err = svc.Submit(bg, jobs.SubmitRequest{Task: "t"})
	if err != nil || string(j.Network) != `{"mode":"none"}` {
		t.Errorf("no policy: %s, %v; want mode none", j.Network, err)
	}
	for _, tc := range []struct{ policy, field string }{
		{`{"presets": ["ruby"]}`, "network.presets[0]"},
		{`{"secrets": ["gitlab"]}`, "network.secrets[0]"},
		{`{"mode": "open"}`, "network.mode"},
		{`{"mode": "none", "allow": ["x.example"]}`, "network.mode"},
		{`{"mode": "closed"}`, "network.mode"},
	} {
		_, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: "t", Network: policy(t, tc.policy)})
		var p *jobs.Problems
		if !errors.Is(err, jobs.ErrBadNetwork) || !errors.As(err, &p) || p.List[0].Field != tc.field || !strings.Contains(p.List[0].Message, tc.field) {
			t.Errorf("%s: %v; want ErrBadNetwork at %s", tc.policy, err, tc.field)
		}
	}
}

// TestSetNetwork: a change is stored with its event in one write, local
// watchers see it before SetNetwork returns, and a stopped watcher does
// not.
func TestSetNetwork(t *testing.T) {
	svc, st := netService(t)
	j, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	var seen []egress.Policy
	stop := svc.WatchNetwork(j.ID, func(p egress.Policy) { seen = append(seen, p) })
	other := 0
	defer svc.WatchNetwork("job-other", func(egress.Policy) { other++ })()
	got, err := svc.SetNetwork(as("alice"), j.ID, policy(t, `{"allow": ["late.test"]}`))
	if err != nil || got.Mode != "allow" || len(got.Allow) != 1 {
		t.Fatalf("SetNetwork: %+v, %v", got, err)
	}
	if len(seen) != 1 || seen[0].Allow[0].Host != "late.test" || other != 0 {
		t.Errorf("watchers saw %+v (other %d)", seen, other)
	}
	j, _ = st.GetJob(bg, j.ID)
	if p := jobs.JobNetwork(j); len(p.Allow) != 1 || p.Allow[0].Host != "late.test" {
		t.Errorf("stored %s", j.Network)
	}
	evs, _ := st.Events(bg, j.ID, 0, 100)
	last := evs[len(evs)-1]
	var np event.NetworkPolicy
	if last.Type != event.TypeNetworkPolicy || json.Unmarshal(last.Payload, &np) != nil || np.By != "alice" || string(np.Policy) != string(j.Network) {
		t.Errorf("last event %s %s", last.Type, last.Payload)
	}
	if _, err := svc.SetNetwork(as("alice"), j.ID, policy(t, `{"mode": "open"}`)); !errors.Is(err, jobs.ErrBadNetwork) {
		t.Errorf("forbidden mode: %v", err)
	}
	if _, err := svc.SetNetwork(bg, "job-missing", egress.Policy{Mode: "none"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
	stop()
	if _, err := svc.SetNetwork(bg, j.ID, egress.Policy{Mode: "none"}); err != nil || len(seen) != 1 {
		t.Errorf("after stop: %v, watcher called %d times", err, len(seen))
	}
	evs, _ = st.Events(bg, j.ID, 0, 100)
	if json.Unmarshal(evs[len(evs)-1].Payload, &np) != nil || np.By != "api" {
		t.Errorf("no caller named: by %q, want api", np.By)
	}
}

// TestUpdateNetwork: fn is given the policy in force and its result is
// checked and put in force as SetNetwork's; an error of fn's, or a policy
// refused, changes nothing and writes no event.
func TestUpdateNetwork(t *testing.T) {
	svc, st := netService(t)
	j, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: "t", Network: policy(t, `{"allow": ["a.test"], "deny": ["evil.example"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	late, _ := egress.ParseRule("late.test")
	got, err := svc.UpdateNetwork(as("web UI"), j.ID, func(p egress.Policy) (egress.Policy, error) {
		if len(p.Allow) != 1 || len(p.Deny) != 1 || p.Mode != "allow" {
			t.Errorf("fn got %+v", p)
		}
		p.Allow = append(p.Allow, late)
		return p, nil
	})
	if err != nil || len(got.Allow) != 2 || len(got.Deny) != 1 {
		t.Fatalf("UpdateNetwork: %+v, %v", got, err)
	}
	before, _ := st.LastSeq(bg, j.ID)
	errNo := errors.New("no")
	if _, err := svc.UpdateNetwork(bg, j.ID, func(p egress.Policy) (egress.Policy, error) { return p, errNo }); !errors.Is(err, errNo) {
		t.Errorf("fn's error: %v", err)
	}
	if _, err := svc.UpdateNetwork(bg, j.ID, func(p egress.Policy) (egress.Policy, error) {
		p.Mode = "open"
		return p, nil
	}); !errors.Is(err, jobs.ErrBadNetwork) {
		t.Errorf("forbidden mode: %v", err)
	}
	after, _ := st.LastSeq(bg, j.ID)
	j, _ = st.GetJob(bg, j.ID)
	if p := jobs.JobNetwork(j); after != before || len(p.Allow) != 2 || p.Mode != "allow" {
		t.Errorf("refused updates changed the job: %s, %d events more", j.Network, after-before)
	}
}

// TestNetworkSummary counts a job's network events per host and port.
func TestNetworkSummary(t *testing.T) {
	svc, st := netService(t)
	j, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: "t", Network: policy(t, `{"allow": ["pypi.org"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	add := func(n event.Network) {
		typ, b, _ := event.Marshal(n)
		if _, err := st.AppendEvent(bg, j.ID, typ, b); err != nil {
			t.Fatal(err)
		}
	}
	add(event.Network{Host: "pypi.org", Port: 443, Decision: "allow", BytesIn: 100, BytesOut: 10, Reason: "allowed by pypi.org"})
	add(event.Network{Host: "pypi.org", Port: 443, Decision: "allow", BytesIn: 50, BytesOut: 5, Reason: "allowed by pypi.org"})
	add(event.Network{Host: "evil.example", Port: 443, Decision: "deny", Reason: "evil.example:443 is not in the job's allow list"})
	add(event.Network{Host: "pypi.org", Port: 80, Decision: "deny", Reason: "x"})
	// A flood's second of repeats, recorded as one event.
	add(event.Network{Host: "evil.example", Port: 443, Decision: "deny", Repeats: 500, Reason: "evil.example:443 is not in the job's allow list"})
	sum, err := svc.Network(bg, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []jobs.HostSummary{
		{Host: "evil.example", Port: 443, Denied: 501, LastDecision: "deny", LastReason: "evil.example:443 is not in the job's allow list"},
		{Host: "pypi.org", Port: 80, Denied: 1, LastDecision: "deny", LastReason: "x"},
		{Host: "pypi.org", Port: 443, Allowed: 2, BytesIn: 150, BytesOut: 15, LastDecision: "allow", LastReason: "allowed by pypi.org"},
	}
	if fmt.Sprint(sum.Hosts) != fmt.Sprint(want) || sum.Connections != 504 || sum.Truncated || sum.Policy.Allow[0].Host != "pypi.org" {
		t.Errorf("summary %+v\nwant hosts %+v", sum, want)
	}
	if _, err := svc.Network(bg, "job-missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}

	// A flood's second of attempts alike is one event with Repeats: the
	// summary counts the attempts, not the event (a sandbox's 10,000
	// refused tries of a host are not "1").
	add(event.Network{Host: "evil.example", Port: 443, Decision: "deny", Repeats: 10000, Reason: "evil.example:443 is not in the job's allow list"})
	add(event.Network{Host: "pypi.org", Port: 443, Decision: "allow", Repeats: 3, BytesIn: 30, Reason: "allowed by pypi.org"})
	if sum, err = svc.Network(bg, j.ID); err != nil {
		t.Fatal(err)
	}
	if sum.Hosts[0].Denied != 10501 || sum.Hosts[2].Allowed != 5 || sum.Hosts[2].BytesIn != 180 || sum.Connections != 504+10003 {
		t.Errorf("with repeats: %+v", sum)
	}
}

// TestNetworkSummaryBounded: a sandbox that tries more hosts than the
// summary lists gets a truncated summary, not an unbounded one.
func TestNetworkSummaryBounded(t *testing.T) {
	svc, st := netService(t)
	j, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = st.UpdateJobLogged(bg, j.ID, func(*store.Job) ([]store.Entry, error) {
		var es []store.Entry
		for i := range jobs.MaxNetworkHosts + 5 {
			typ, b, _ := event.Marshal(event.Network{Host: fmt.Sprintf("h%d.example", i), Port: 443, Decision: "deny"})
			es = append(es, store.Entry{Type: typ, Payload: b})
		}
		return es, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := svc.Network(bg, j.ID)
	if err != nil || len(sum.Hosts) != jobs.MaxNetworkHosts || !sum.Truncated || sum.Connections != jobs.MaxNetworkHosts+5 {
		t.Errorf("%d hosts, %d connections, truncated %v, %v", len(sum.Hosts), sum.Connections, sum.Truncated, err)
	}
}

// TestNetworkSummaryWindow: a log longer than MaxNetworkEvents is
// summarised over its last events: the latest connection is in, the
// first is out, and the summary says so.
func TestNetworkSummaryWindow(t *testing.T) {
	svc, st := netService(t)
	j, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: "t"})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = st.UpdateJobLogged(bg, j.ID, func(*store.Job) ([]store.Entry, error) {
		es := make([]store.Entry, 0, jobs.MaxNetworkEvents+2)
		for i := range jobs.MaxNetworkEvents + 2 {
			host := "middle.example"
			switch i {
			case 0:
				host = "first.example"
			case jobs.MaxNetworkEvents + 1:
				host = "last.example"
			}
			typ, b, _ := event.Marshal(event.Network{Host: host, Port: 443, Decision: "deny"})
			es = append(es, store.Entry{Type: typ, Payload: b})
		}
		return es, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := svc.Network(bg, j.ID)
	if err != nil || !sum.Truncated || sum.Connections != jobs.MaxNetworkEvents || len(sum.Hosts) != 2 ||
		sum.Hosts[0].Host != "last.example" || sum.Hosts[1].Host != "middle.example" {
		t.Errorf("%+v, %v; want the last %d events: last.example and middle.example, truncated", sum.Hosts, err, jobs.MaxNetworkEvents)
	}
}
