package main

import (
	"fmt"
	"time"

	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/store"
)

// checkCeilings refuses a command's limits over the operator's ceilings,
// as the API refuses a job's, and fits the open-files limit to the
// processes asked for.
func (a *app) checkCeilings(l *sandbox.Limits, timeout time.Duration) error {
	c := a.cfg.Sandbox.Ceilings
	err := jobs.CheckCeilings(store.Limits{MemoryBytes: l.MemoryBytes, NanoCPUs: l.NanoCPUs, DiskBytes: l.DiskBytes, Timeout: timeout}, c)
	if err != nil {
		return err
	}
	if l.PidsLimit > c.PidsLimit {
		return fmt.Errorf("%w: --pids %d is over its ceiling %d (AGENTBOX_CEILING_PIDS)", jobs.ErrOverCeiling, l.PidsLimit, c.PidsLimit)
	}
	if l.PidsLimit > 0 {
		nofile, err := a.fitNoFile(1, l.PidsLimit)
		if err != nil {
			return err
		}
		l.NoFile = nofile
	}
	return nil
}

// stoppedBy is why the driver stopped s (its disk quota), or nil.
func stoppedBy(s sandbox.Sandbox) error {
	if st, ok := s.(sandbox.Stopper); ok {
		return st.Stopped()
	}
	return nil
}
