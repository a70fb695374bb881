package wiring

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/cluster"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/wire"
)

// runsJobs reports whether a process in role runs sandboxes.
func runsJobs(role string) bool { return role != config.RoleAPI }

// servesAPI reports whether a process in role serves REST, SSE and the UI.
func servesAPI(role string) bool { return role != config.RoleWorker }

// advertiseAddr is where other processes reach this one's internal
// endpoint: AGENTBOX_ADVERTISE_ADDR, else the listen address with the port
// it got, the host name in place of an address of every interface.
func advertiseAddr(cfg config.Config, l net.Addr) string {
	if a := cfg.Cluster.AdvertiseAddr; a != "" {
		return a
	}
	_, port, err := net.SplitHostPort(l.String())
	if err != nil {
		return l.String()
	}
	host, _, err := net.SplitHostPort(cfg.Server.Addr)
	if ip := net.ParseIP(host); err != nil || host == "" || (ip != nil && ip.IsUnspecified()) {
		host, _ = os.Hostname()
	}
	return net.JoinHostPort(host, port)
}

// workerHandler is what a worker serves on --addr: GET /healthz, GET
// /metrics for a bearer of the cluster secret, and the internal endpoint
// the API replicas reach running jobs through (internalHandler).
func workerHandler(cfg config.Config, j *jobSide, reg *prometheus.Registry, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeWireJSON(w, http.StatusOK, wire.Health{Status: "ok"})
	})
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		if !clusterBearer(cfg, r) {
			writeWireJSON(w, http.StatusUnauthorized, wire.ErrorResponse{Error: wire.ErrorDetail{
				Code: wire.CodeUnauthorized, Message: "metrics need the cluster secret as a bearer token"}})
			return
		}
		metrics.ServeHTTP(w, r)
	})
	mux.Handle("/", internalHandler(cfg, j, log))
	return mux
}

// internalHandler is a worker's internal endpoint (internal/cluster):
// the API replicas reach the desktop and Jupyter of the jobs this worker
// runs through it, authenticated with AGENTBOX_CLUSTER_SECRET.
func internalHandler(cfg config.Config, j *jobSide, log *slog.Logger) http.Handler {
	return cluster.Handler(cfg.Cluster.Secret, j.service, log)
}

// clusterSandboxes is the job service whose Guest also reaches the jobs
// other workers run, through their internal endpoints (cluster.Resolver):
// what the API's desktop and Jupyter proxy uses.
type clusterSandboxes struct {
	*jobs.Service
	resolver *cluster.Resolver
}

func (c clusterSandboxes) Guest(ctx context.Context, id string) (*guest.Client, error) {
	return c.resolver.Guest(ctx, id)
}

// apiService is what the API serves: the job service, with the other
// workers' sandboxes reachable when the store is shared.
func apiService(cfg config.Config, j *jobSide, self string, log *slog.Logger) api.Service {
	if !config.StoreIsPostgres(cfg.Store) {
		return j.service
	}
	r := cluster.NewResolver(j.service, j.store, self, cfg.Cluster.Secret, log)
	r.Lease = max(cfg.Server.Lease, r.Lease)
	return clusterSandboxes{Service: j.service, resolver: r}
}

// clusterBearer reports whether r carries the cluster secret as its
// bearer token.
func clusterBearer(cfg config.Config, r *http.Request) bool {
	want := "Bearer " + cfg.Cluster.Secret
	got := r.Header.Get("Authorization")
	return cfg.Cluster.Secret != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// writeWireJSON writes v as a JSON answer with status.
func writeWireJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
