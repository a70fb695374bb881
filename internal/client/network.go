package client

import (
	"context"
	"net/http"

	"github.com/agentbox/agentbox/internal/netpolicy"
	"github.com/agentbox/agentbox/internal/wire"
)

// Network returns a job's egress policy and what its sandbox did on the
// network, per host (GET /v1/jobs/{id}/network).
func (c *Client) Network(ctx context.Context, id string) (wire.NetworkSummary, error) {
	var out wire.NetworkSummary
	err := c.getJSON(ctx, "GET", jobPath(id)+"/network", nil, nil, http.StatusOK, &out)
	return out, err
}

// SetNetwork changes a job's egress policy and returns the policy now in
// force (PATCH /v1/jobs/{id}/network).
func (c *Client) SetNetwork(ctx context.Context, id string, p netpolicy.Policy) (netpolicy.Policy, error) {
	var out netpolicy.Policy
	err := c.getJSON(ctx, "PATCH", jobPath(id)+"/network", p, nil, http.StatusOK, &out)
	return out, err
}
