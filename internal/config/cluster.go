package config

import (
	"errors"
	"fmt"
)

// The roles of `agentbox serve` (Config.Role).
const (
	// RoleAll serves the API and runs jobs in one process: one host.
	RoleAll = "all"
	// RoleAPI serves REST, SSE and the UI and runs no sandboxes.
	RoleAPI = "api"
	// RoleWorker claims jobs and runs them on its local engine, and serves
	// only the internal endpoint the API replicas reach it by.
	RoleWorker = "worker"
)

// MinClusterSecret is the shortest AGENTBOX_CLUSTER_SECRET accepted.
const MinClusterSecret = 32

// Cluster configures serve's part in a cluster of API replicas and
// workers sharing one PostgreSQL store.
type Cluster struct {
	// Secret authenticates the API replicas to the workers' internal
	// endpoint (AGENTBOX_CLUSTER_SECRET): at least MinClusterSecret
	// characters, the same on every process. Never logged.
	Secret string
	// AdvertiseAddr is the host:port other processes reach this worker's
	// internal endpoint at (AGENTBOX_ADVERTISE_ADDR). Empty: the listen
	// address, or the host name with its port when it listens on every
	// interface.
	AdvertiseAddr string
}

// String hides the secret, so a logged or printed Cluster never shows it.
func (c Cluster) String() string {
	return fmt.Sprintf("{Secret:%s AdvertiseAddr:%s}", redacted(c.Secret), c.AdvertiseAddr)
}

// GoString hides the secret from %#v too.
func (c Cluster) GoString() string { return c.String() }

func redacted(s string) string {
	if s == "" {
		return `""`
	}
	return "xxxxx"
}

// validRole checks Role and what it needs: api and worker share jobs
// through PostgreSQL, and a worker's internal endpoint needs the secret.
func (c Config) validRole() error {
	var errs []error
	switch c.Role {
	case RoleAll, "":
	case RoleAPI, RoleWorker:
		if !StoreIsPostgres(c.Store) {
			errs = append(errs, fmt.Errorf("role %s: needs a PostgreSQL store that every process shares "+
				"(set AGENTBOX_STORE=postgres://… or --store); with SQLite each process would have jobs of its own", c.Role))
		}
	default:
		return fmt.Errorf("role %q: want all, api or worker (AGENTBOX_ROLE, --role)", c.Role)
	}
	if c.Role == RoleWorker && c.Cluster.Secret == "" {
		errs = append(errs, errors.New("role worker: needs AGENTBOX_CLUSTER_SECRET, the secret the API replicas and workers share "+
			"(make one with: head -c 32 /dev/urandom | base64)"))
	}
	if n := len(c.Cluster.Secret); n > 0 && n < MinClusterSecret {
		errs = append(errs, fmt.Errorf("AGENTBOX_CLUSTER_SECRET: %d characters, want at least %d (make one with: head -c 32 /dev/urandom | base64)", n, MinClusterSecret))
	}
	if c.Role == RoleWorker && c.Server.Concurrency < 1 {
		errs = append(errs, fmt.Errorf("role worker: concurrency %d, want at least 1 (AGENTBOX_CONCURRENCY)", c.Server.Concurrency))
	}
	return errors.Join(errs...)
}
