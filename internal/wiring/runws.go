package wiring

import (
	"context"
	"os"

	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/workspace"
)

// `agentbox run --workspace DIR` works on a copy of DIR, staged in the
// run's own store before the job exists; with --in-place it works in DIR
// itself, which the sandbox mounts as it is (workspace.ProjectDir says
// what DIR may be; `agentbox chat` shares it).

// personalWorkspaces is a driver whose sandboxes mount their workspace as
// it is: a person's directory, never held on a disk of the driver's own
// and copied back (which would replace the directory).
type personalWorkspaces struct{ sandbox.Driver }

func (d personalWorkspaces) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	b := sandbox.BindingOf(spec)
	b.ManagedWorkspace = false
	spec.Binding = &b
	return d.Driver.Create(ctx, spec)
}

// Capabilities are the driver's, but for Bind: sandbox.Start gives the
// workspace to Create, where it is made personal.
func (d personalWorkspaces) Capabilities() sandbox.Capabilities {
	c := d.Driver.Capabilities()
	c.Bind = false
	return c
}

// runDir resolves the directory of --workspace (workspace.ProjectDir).
func (r RunRequest) runDir(dataDir string) (string, error) {
	return workspace.ProjectDir(r.Workspace, dataDir, r.InPlace)
}

// stageCopy copies dir into the run's store for the job about to be
// submitted, and says what it left out.
func stageCopy(ctx context.Context, svc *jobs.Service, dir string) (*jobs.Staged, []string, error) {
	var st *jobs.Staged
	skipped, err := workspace.CopyProject(dir, func(root *os.Root) (skipped []string, err error) {
		st, skipped, err = svc.StageCopy(ctx, root)
		return skipped, err
	})
	return st, skipped, err
}
