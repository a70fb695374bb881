package config

import (
	"fmt"
	"strings"
	"testing"
)

const testSecret = "0123456789abcdef0123456789abcdef"

// TestRoles: all is the default and needs nothing; api and worker need a
// PostgreSQL store; a worker needs the cluster secret, long enough; the
// errors say what to set and how to make a secret.
func TestRoles(t *testing.T) {
	pg := "postgres://agentbox@db/agentbox"
	for _, tc := range []struct {
		env  map[string]string
		want []string // "" for no error
	}{
		{map[string]string{}, nil},
		{map[string]string{"AGENTBOX_ROLE": "all"}, nil},
		{map[string]string{"AGENTBOX_ROLE": "api", "AGENTBOX_STORE": pg}, nil},
		{map[string]string{"AGENTBOX_ROLE": "worker", "AGENTBOX_STORE": pg, "AGENTBOX_CLUSTER_SECRET": testSecret}, nil},
		{map[string]string{"AGENTBOX_ROLE": "api"}, []string{"role api: needs a PostgreSQL store", "AGENTBOX_STORE=postgres://"}},
		{map[string]string{"AGENTBOX_ROLE": "worker", "AGENTBOX_STORE": "sqlite", "AGENTBOX_CLUSTER_SECRET": testSecret},
			[]string{"role worker: needs a PostgreSQL store"}},
		{map[string]string{"AGENTBOX_ROLE": "worker", "AGENTBOX_STORE": pg},
			[]string{"needs AGENTBOX_CLUSTER_SECRET", "head -c 32 /dev/urandom | base64"}},
		{map[string]string{"AGENTBOX_ROLE": "api", "AGENTBOX_STORE": pg, "AGENTBOX_CLUSTER_SECRET": "short-secret"},
			[]string{"AGENTBOX_CLUSTER_SECRET: 12 characters, want at least 32"}},
		{map[string]string{"AGENTBOX_ROLE": "worker", "AGENTBOX_STORE": pg, "AGENTBOX_CLUSTER_SECRET": testSecret, "AGENTBOX_CONCURRENCY": "0"},
			[]string{"role worker: concurrency 0"}},
		{map[string]string{"AGENTBOX_ROLE": "both"}, []string{`role "both": want all, api or worker`}},
	} {
		c, err := FromLookup(lookup(tc.env))
		if len(tc.want) == 0 {
			if err != nil {
				t.Errorf("%v: %v", tc.env, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%v: no error, want %q", tc.env, tc.want)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q, want %q", tc.env, err, w)
			}
		}
		if s := c.Cluster.Secret; s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
}

// TestClusterFromEnv: the role, the secret and the advertised address are
// read; the secret is never printed with the config.
func TestClusterFromEnv(t *testing.T) {
	c, err := FromLookup(lookup(map[string]string{"AGENTBOX_ROLE": "worker", "AGENTBOX_STORE": "postgres://db/agentbox",
		"AGENTBOX_CLUSTER_SECRET": testSecret, "AGENTBOX_ADVERTISE_ADDR": "worker-1.internal:8081"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Role != RoleWorker || c.Cluster.Secret != testSecret || c.Cluster.AdvertiseAddr != "worker-1.internal:8081" {
		t.Errorf("config %+v", c)
	}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(f, c); strings.Contains(s, testSecret) {
			t.Errorf("%s shows the secret: %s", f, s)
		}
	}
	if d := Default(); d.Role != RoleAll {
		t.Errorf("default role %q", d.Role)
	}
}

// TestBlobs: checkpoints default to the Postgres database in a cluster
// and to none on SQLite; a directory must be absolute; postgres blobs need
// the Postgres store.
func TestBlobs(t *testing.T) {
	pg := "postgres://agentbox@db/agentbox"
	for _, tc := range []struct {
		env             map[string]string
		kind, dir, fail string
	}{
		{map[string]string{}, BlobsNone, "", ""},
		{map[string]string{"AGENTBOX_STORE": pg}, BlobsPostgres, "", ""},
		{map[string]string{"AGENTBOX_STORE": pg, "AGENTBOX_BLOBS": "none"}, BlobsNone, "", ""},
		{map[string]string{"AGENTBOX_STORE": pg, "AGENTBOX_BLOBS": "/mnt/blobs"}, BlobsDir, "/mnt/blobs", ""},
		{map[string]string{"AGENTBOX_BLOBS": "/mnt/blobs"}, BlobsDir, "/mnt/blobs", ""},
		{map[string]string{"AGENTBOX_BLOBS": "postgres"}, "", "", "blobs postgres: keeps checkpoints in the job store's database, and the store is SQLite"},
		{map[string]string{"AGENTBOX_BLOBS": "blobs"}, "", "", `blobs "blobs": want none, postgres, or the absolute path`},
	} {
		c, err := FromLookup(lookup(tc.env))
		if tc.fail != "" {
			if err == nil || !strings.Contains(err.Error(), tc.fail) {
				t.Errorf("%v: error %v, want %q", tc.env, err, tc.fail)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.env, err)
			continue
		}
		if kind, dir := c.BlobsKind(); kind != tc.kind || dir != tc.dir {
			t.Errorf("%v: blobs %q %q, want %q %q", tc.env, kind, dir, tc.kind, tc.dir)
		}
	}
}
