package jobs

// STUB for the ui branch (issue 26): the lead deletes this file at the
// merge and implements these with the job's stored policy, the server's
// egress.Config and the job's egress proxy. Only the signatures matter.

import (
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
