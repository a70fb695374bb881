package config

import (
	"errors"
	"fmt"
	"path/filepath"
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

// The kinds of blob store (Config.Blobs, BlobsKind).
const (
	// BlobsNone keeps no checkpoints: a job's workspace lives on the host
	// that runs it, as on one host.
	BlobsNone = "none"
	// BlobsPostgres keeps them in the job store's PostgreSQL database.
	BlobsPostgres = "postgres"
	// BlobsDir keeps them in a directory every host mounts.
	BlobsDir = "dir"
)

// BlobsKind says where workspace checkpoints and final artifacts go, from
// Config.Blobs (AGENTBOX_BLOBS, --blobs): "none"; "postgres", the job
// store's database; an absolute path, a directory every host mounts
// (BlobsDir, with the path); empty, "postgres" with a PostgreSQL store
// (a cluster) and "none" with SQLite (one host).
func (c Config) BlobsKind() (kind, dir string) {
	switch b := c.Blobs; {
	case b == "" && StoreIsPostgres(c.Store):
		return BlobsPostgres, ""
	case b == "" || b == BlobsNone:
		return BlobsNone, ""
	case b == BlobsPostgres:
		return BlobsPostgres, ""
	default:
		return BlobsDir, b
	}
}

// validBlobs checks Config.Blobs: a Postgres blob store needs the
// Postgres job store, a directory an absolute path.
func (c Config) validBlobs() error {
	kind, dir := c.BlobsKind()
	switch {
	case kind == BlobsPostgres && !StoreIsPostgres(c.Store):
		return errors.New("blobs postgres: keeps checkpoints in the job store's database, and the store is SQLite " +
			"(set AGENTBOX_STORE=postgres://…, or AGENTBOX_BLOBS to a directory every host mounts)")
	case kind == BlobsDir && !filepath.IsAbs(dir):
		return fmt.Errorf("blobs %q: want none, postgres, or the absolute path of a directory every host mounts (AGENTBOX_BLOBS, --blobs)", dir)
	}
	return nil
}
