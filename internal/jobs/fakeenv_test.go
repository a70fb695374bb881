package jobs_test

import (
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/fake"
)

// newFakeEnv is newEnv on the fake driver (internal/sandbox/fake), for the
// tests that are not about isolation: the scheduler's leases, heartbeat,
// watchdog, cancel and recovery. They run with no container engine;
// scripts/test.sh runs them so, with DOCKER_HOST pointing nowhere.
func newFakeEnv(t *testing.T) *env {
	t.Helper()
	e := newBareEnv(t, "")
	d, err := fake.New(fake.Config{Dir: filepath.Join(e.dir, "sandboxes"), StandIn: sandbox.IsolationContainer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	e.driver = d
	return e
}
