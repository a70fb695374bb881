package jobs_test

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/drivers"
	"github.com/agentbox/agentbox/internal/store"
)

// TestTierUnavailableOnWorkerEndsInError: a node that checks no tier (an
// API-only one) accepts a gvisor job; the worker that claims it has no
// gvisor tier. The job ends in error saying why, after one attempt,
// rather than going back to the queue.
func TestTierUnavailableOnWorkerEndsInError(t *testing.T) {
	e := newEnv(t)
	const why = "runsc is not registered with this worker's engine"
	tiers, err := drivers.NewTiers(sandbox.IsolationContainer, map[string]sandbox.Driver{sandbox.IsolationContainer: e.driver},
		map[string]string{sandbox.IsolationGVisor: why})
	if err != nil {
		t.Fatal(err)
	}
	e.worker = tiers
	svc, _ := e.start(t, jobs.ShellAgent{})
	j, _, err := svc.Submit(bg, jobs.SubmitRequest{Task: "true", Isolation: sandbox.IsolationGVisor})
	if err != nil {
		t.Fatal(err)
	}
	got := await(t, svc, j.ID)
	if got.Status != store.StatusError || !strings.Contains(got.Error, why) || got.Attempts != 1 {
		t.Errorf("job %s after %d attempts: %q; want error saying %q after one", got.Status, got.Attempts, got.Error, why)
	}
	evs := eventsOf(t, svc, j.ID)
	if last := evs[len(evs)-1]; last.Type != event.TypeState || !strings.Contains(string(last.Payload), why) {
		t.Errorf("last event %s %s, want the final state saying why", last.Type, last.Payload)
	}
	e.assertNoSandboxes(t)
}
