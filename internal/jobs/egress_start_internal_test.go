package jobs

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/workspace"
)

// guestOnly is a sandbox whose guest is never reached.
type guestOnly struct{ g *guest.Client }

func (s guestOnly) Handle() sandbox.Handle        { return sandbox.Handle{ID: "sb_test"} }
func (s guestOnly) Guest() *guest.Client          { return s.g }
func (s guestOnly) Destroy(context.Context) error { return nil }

// TestStartEgressCurrentPolicy: a worker reads the job when it claims it
// and starts its proxy once the sandbox is made, seconds later; a PATCH in
// between (no proxy yet to tell, and its event before the point the
// proxy follows the log from) was lost: the proxy ran the policy of the
// claim, wider than the one GET showed, for the whole attempt. It must
// start with, or at once take, the policy in force.
func TestStartEgressCurrentPolicy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "agentbox.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := &egress.Config{}
	sched := NewScheduler(SchedulerConfig{Store: st, WorkerID: "w", Egress: &Egress{Config: cfg}})
	svc, err := NewService(ServiceConfig{Store: st, Workspaces: workspace.NewLocal(dir), Scheduler: sched, Egress: cfg})
	if err != nil {
		t.Fatal(err)
	}
	var wide egress.Policy
	if err := json.Unmarshal([]byte(`{"mode": "open"}`), &wide); err != nil {
		t.Fatal(err)
	}
	j, _, err := svc.Submit(ctx, SubmitRequest{Task: "t", Network: wide})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := st.GetJob(ctx, j.ID) // what the worker read at its claim
	if err != nil {
		t.Fatal(err)
	}
	var narrow egress.Policy
	if err := json.Unmarshal([]byte(`{"allow": ["pypi.example"]}`), &narrow); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetNetwork(WithPrincipal(ctx, Principal{Name: "alice"}), j.ID, narrow); err != nil { // while the sandbox is made
		t.Fatal(err)
	}
	je, _, err := sched.prepareEgress(claimed)
	if err != nil {
		t.Fatal(err)
	}
	if err := sched.startEgress(ctx, claimed, guestOnly{guest.NewClient(filepath.Join(dir, "none.sock"))}, je); err != nil {
		t.Fatal(err)
	}
	defer je.stop()
	if got := je.Policy(); got.Mode != "allow" || len(got.Allow) != 1 || got.Allow[0].Host != "pypi.example" {
		t.Errorf("the proxy applies %+v, want the policy PATCHed before it started (allow pypi.example)", got)
	}
}
