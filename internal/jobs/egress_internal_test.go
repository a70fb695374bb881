package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/workspace"
)

// TestNetRecorderBoundsAFlood: 20,000 attempts at 500 names in a moment
// are written as at most the burst plus one summary per kind, and the
// summaries' Repeats account for every attempt not written alone.
func TestNetRecorderBoundsAFlood(t *testing.T) {
	var mu sync.Mutex
	var written []event.Network
	r := newNetRecorder(func(ev event.Network) {
		mu.Lock()
		written = append(written, ev)
		mu.Unlock()
	})
	const attempts = 20000
	for i := range attempts {
		r.record(event.Network{Host: fmt.Sprintf("h%d.test", i%500), Port: 443, Decision: "deny"})
	}
	r.flush()
	total := 0
	for _, ev := range written {
		total += max(ev.Repeats, 1)
	}
	// Past netPending kinds, the rest are one more summary each way.
	if limit := netBurst + netPending + 2 + netRate; len(written) > limit {
		t.Errorf("%d events written for a flood, want at most %d", len(written), limit)
	}
	if total != attempts {
		t.Errorf("the events stand for %d attempts, want %d", total, attempts)
	}
	var summaries int
	for _, ev := range written {
		if ev.Repeats > 1 {
			summaries++
		}
	}
	if summaries == 0 {
		t.Error("no summary event with Repeats")
	}
}

// TestFollowPolicyAppliesAnotherProcesssChange: a policy change another
// process appended to the job's log (an API replica's PATCH) reaches the
// job's proxy here; the job's own first policy event does not re-apply.
func TestFollowPolicyAppliesAnotherProcesssChange(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "agentbox.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := NewScheduler(SchedulerConfig{Store: st, WorkerID: "w", Workspaces: workspace.NewLocal(dir)})
	now := time.Now().UTC()
	j, _, err := st.CreateJob(t.Context(), store.Job{ID: NewID(), Task: "t", Status: store.StatusRunning, MaxAttempts: 1, CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan egress.Policy, 4)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.feed.followPolicy(ctx, j.ID, 0, func(p egress.Policy) { got <- p })
	}()
	// What another process writes: the row and the event, no local call.
	raw, _ := json.Marshal(egress.Policy{Mode: egress.ModeAllow, Allow: []egress.Rule{mustRule(t, "late.test")}})
	waitFollowing := time.Now()
	for {
		// followPolicy reads after seq 0 once woken: append until one
		// lands after it subscribed.
		if _, err := s.feed.append(t.Context(), j.ID, event.NetworkPolicy{By: "alice", Policy: raw}); err != nil {
			t.Fatal(err)
		}
		select {
		case p := <-got:
			if len(p.Allow) != 1 || p.Allow[0].Host != "late.test" {
				t.Fatalf("applied %+v", p)
			}
			cancel()
			<-done
			return
		case <-time.After(200 * time.Millisecond):
		}
		if time.Since(waitFollowing) > 10*time.Second {
			t.Fatal("the change was never applied")
		}
	}
}

func mustRule(t *testing.T, s string) egress.Rule {
	r, err := egress.ParseRule(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
