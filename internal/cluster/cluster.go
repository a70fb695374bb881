// Package cluster carries a request for a running job's sandbox from the
// API replica that received it to the worker running the job, when
// agentbox serves from several hosts.
//
// A worker serves Handler on its internal endpoint: it reverse-proxies
// /internal/v1/jobs/{id}/guest/proxy/... to the guest of the job's sandbox
// on that host, WebSocket upgrades included. The API side's Resolver finds
// the worker that holds a job's lease and hands the API's desktop and
// Jupyter proxy a guest client whose transport goes through that endpoint.
//
// Trust model: the worker trusts whoever presents the cluster secret
// (AGENTBOX_CLUSTER_SECRET, as Authorization: Bearer), and nobody else;
// with no secret configured it refuses every request. The secret is only
// ever sent from an API replica to a worker, inside the cluster: the API
// never exposes the tunnel to its clients (it reaches it only through its
// own authenticated, header-filtering proxy routes) and never passes the
// secret on; the worker strips it before the guest sees the request. Only
// the guest's /proxy/ routes (its web services) pass, not its exec or file
// routes. The guest itself is never exposed.
package cluster

import (
	"context"
	"net/http"

	"github.com/agentbox/agentbox/internal/guest"
)

// Guests reaches the guest of a running job's sandbox on this host
// (jobs.Service does). Errors: store.ErrNotFound for an unknown job,
// jobs.ErrNoSandbox when it has no running sandbox here.
type Guests interface {
	Guest(ctx context.Context, jobID string) (*guest.Client, error)
}

// routePrefix is where a job's tunnel begins: /internal/v1/jobs/{id}/guest
// followed by the guest's own path.
const routePrefix = "/internal/v1/jobs/"

// guestPath is the only part of the guest the tunnel reaches: its web
// services' proxy.
const guestPath = "/proxy/"

// errorHeader marks an error the worker itself answered (as opposed to one
// the guest or its services sent, which passes through as is), so the API
// side can turn it into its own error.
const errorHeader = "Agentbox-Cluster-Error"

// bearer is the Authorization header value that carries secret.
func bearer(secret string) string { return "Bearer " + secret }

// dropCredentials removes the cluster's and the sandbox's secrets from h.
func dropCredentials(h http.Header) {
	h.Del("Authorization")
	h.Del(guest.SecretHeader)
}
