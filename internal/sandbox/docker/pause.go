package docker

import (
	"context"
	"fmt"

	"github.com/agentbox/agentbox/internal/sandbox"
)

var (
	_ sandbox.Pauser = (*Sandbox)(nil)
	_ sandbox.Exiter = (*Sandbox)(nil)
)

// Pause freezes the sandbox's processes (the engine's cgroup freezer under
// runc, runsc's own under gVisor): they keep their memory and use no CPU
// until Unpause. The guest does not answer meanwhile.
func (s *Sandbox) Pause(ctx context.Context) error {
	if err := s.d.cli.ContainerPause(ctx, s.h.Ref); err != nil {
		return fmt.Errorf("pause sandbox %s: %w", s.h.ID, engineErr(err))
	}
	return nil
}

// Unpause thaws a sandbox Pause froze.
func (s *Sandbox) Unpause(ctx context.Context) error {
	if err := s.d.cli.ContainerUnpause(ctx, s.h.Ref); err != nil {
		return fmt.Errorf("unpause sandbox %s: %w", s.h.ID, engineErr(err))
	}
	return nil
}
