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
		c, err := fromLookup(lookup(tc.env))
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
	c, err := fromLookup(lookup(map[string]string{"AGENTBOX_ROLE": "worker", "AGENTBOX_STORE": "postgres://db/agentbox",
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
