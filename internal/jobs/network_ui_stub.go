package jobs

// STUB for the ui branch (issue 26): the lead deletes this file at the
// merge and implements these with the job's stored policy, the server's
// egress.Config and the job's egress proxy. Only the signatures matter.

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/event"
)

// EgressPolicy is the job's egress policy in force, presets and secrets
// expanded (STUB: none).
func (r *Run) EgressPolicy() egress.Effective { return egress.Effective{Mode: egress.ModeNone} }

// EgressDenials is what the job's egress proxy refused, for the tools'
// hint; nil when the job has no network (STUB: nil).
func (r *Run) EgressDenials() interface {
	Denied(since time.Time) []event.Network
} {
	return nil
}

// SetNetwork puts p in force for job id and records who did (STUB: no
// check, nothing stored but the network_policy event the real one emits
// too, so that the job page and its tests see the change).
func (s *Service) SetNetwork(ctx context.Context, id string, p egress.Policy, by string) (egress.Policy, error) {
	if _, err := s.Get(ctx, id); err != nil {
		return p, err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return p, err
	}
	return p, s.emit(ctx, id, event.NetworkPolicy{By: by, Policy: b})
}
