package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentbox/agentbox/internal/sandbox"
)

// bindRow times create → first exec of a job's sandbox made in two steps
// (an unbound Create, then Bind: a pooled sandbox's path, sandbox.BindLate)
// against the same made in one (sandbox.Start: Create given the binding),
// interleaved so both meet the same load. The binding is a job's: a
// managed workspace holding a few files, an environment and a web base.
// The row is asked for only where the driver binds late.
func bindRow(ctx context.Context, o Options) (Row, error) {
	fmt.Fprintf(o.Log, "create + bind -> first exec: %d sandboxes each way\n", o.Creates)
	var one, two []time.Duration
	for i := range o.Creates + 1 { // the first of each warms up, untimed
		for _, late := range []bool{false, true} {
			d, err := bindSample(ctx, o, late)
			if err != nil {
				return Row{}, err
			}
			if i == 0 {
				continue
			}
			if late {
				two = append(two, d)
			} else {
				one = append(one, d)
			}
		}
	}
	name := "create → bind → first exec (two steps)"
	return Row{Name: name, Baseline: "Create given the binding → first exec (one step)",
		Ours: summarize(two), Base: summarize(one)}, nil
}

// bindSample makes one job's sandbox, in two steps if late, and times it
// to its first exec; it destroys the sandbox and the workspace untimed.
func bindSample(ctx context.Context, o Options, late bool) (time.Duration, error) {
	ws, err := os.MkdirTemp("", "agentbox-bench-ws-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(ws)
	for _, name := range []string{"README.md", "main.go", "go.mod"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte("bench\n"), 0o644); err != nil {
			return 0, err
		}
	}
	b := sandbox.Binding{JobID: "bench", WorkspaceDir: ws, ManagedWorkspace: true,
		Env: map[string]string{"BENCH": "1"}, WebBase: "/v1/jobs/bench"}
	begin := time.Now()
	var s sandbox.Sandbox
	if late {
		s, err = sandbox.BindLate(ctx, o.Driver, sandbox.Spec{}, b)
	} else {
		s, err = sandbox.Start(ctx, o.Driver, sandbox.Spec{}, b)
	}
	if err != nil {
		return 0, err
	}
	err = execTrue(ctx, s.Guest())
	took := time.Since(begin)
	if derr := s.Destroy(context.WithoutCancel(ctx)); err == nil {
		err = derr
	}
	return took, err
}
