package chat

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/fake"
)

// countingDriver is the fake driver (real guests, no engine) counting the
// sandboxes it creates and destroys, and keeping the spec of the last.
type countingDriver struct {
	sandbox.Driver
	mu                 sync.Mutex
	created, destroyed int
	spec               sandbox.Spec
	fail               error // what Create fails with, if set
}

func newCountingDriver(t *testing.T) *countingDriver {
	t.Helper()
	dir, err := os.MkdirTemp("", "abc") // short: the guest's socket path is limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d, err := fake.New(fake.Config{Dir: dir, StandIn: sandbox.IsolationContainer})
	if err != nil {
		t.Fatal(err)
	}
	return &countingDriver{Driver: d}
}

func (d *countingDriver) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail != nil {
		return nil, d.fail
	}
	sb, err := d.Driver.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	d.created++
	d.spec = spec
	return countedSandbox{sb, d}, nil
}

// countedSandbox counts its Destroy calls on its driver.
type countedSandbox struct {
	sandbox.Sandbox
	d *countingDriver
}

func (s countedSandbox) Destroy(ctx context.Context) error {
	s.d.mu.Lock()
	s.d.destroyed++
	s.d.mu.Unlock()
	return s.Sandbox.Destroy(ctx)
}
