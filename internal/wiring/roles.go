package wiring

import (
	"crypto/subtle"
	"encoding/json"
	"net"
	"net/http"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentbox/agentbox/internal/config"
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
func workerHandler(cfg config.Config, j *jobSide, reg *prometheus.Registry) http.Handler {
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
	mux.Handle("/", internalHandler(cfg, j))
	return mux
}

// internalHandler is a worker's internal endpoint: what the API replicas
// ask a worker about the jobs it runs (files, diff, the desktop and
// Jupyter of a running job), authenticated with AGENTBOX_CLUSTER_SECRET.
// The seam for internal/cluster's handler: until it is plugged in here,
// every request answers 404.
func internalHandler(_ config.Config, _ *jobSide) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeWireJSON(w, http.StatusNotFound, wire.ErrorResponse{Error: wire.ErrorDetail{
			Code: wire.CodeNotFound, Message: "no route " + r.Method + " " + r.URL.Path + " on a worker (role worker serves no API)"}})
	})
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
