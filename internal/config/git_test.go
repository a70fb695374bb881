package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestGitFromEnv(t *testing.T) {
	c, err := FromLookup(lookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	if g := c.Git; g.Author != "agentbox <agentbox@localhost>" || !g.AllowLocal || g.Timeout != 10*time.Minute || g.Memory != 1<<30 || g.BigFile != 1<<20 || g.Diffs != 2 || g.MaxDiff != 256<<20 || g.TokenUser != "x-access-token" || g.Token != "" {
		t.Errorf("defaults %+v", g)
	}
	c, err = FromLookup(lookup(map[string]string{
		"AGENTBOX_GIT_TOKEN": "ghp_x", "AGENTBOX_GIT_TOKEN_USER": "bot", "AGENTBOX_GIT_TOKEN_HOSTS": "github.com, git.example.com:8443",
		"AGENTBOX_GIT_SSH_KEY": "/etc/agentbox/id_ed25519", "AGENTBOX_GIT_SSH_KNOWN_HOSTS": "/etc/agentbox/known_hosts",
		"AGENTBOX_GIT_AUTHOR": "Bot <bot@example.com>", "AGENTBOX_GIT_ALLOW_LOCAL": "false", "AGENTBOX_GIT_TIMEOUT": "2m",
		"AGENTBOX_GIT_HOSTS": "gitea=git.example.com:8443", "AGENTBOX_GIT_MEMORY": "256m", "AGENTBOX_GIT_BIG_FILE": "64k", "AGENTBOX_GIT_DIFFS": "4",
		"AGENTBOX_GIT_MAX_DIFF": "64m",
	}))
	if err != nil {
		t.Fatal(err)
	}
	g := c.Git
	if g.Token != "ghp_x" || g.TokenUser != "bot" || !slices.Equal(g.TokenHosts, []string{"github.com", "git.example.com:8443"}) ||
		g.SSHKey != "/etc/agentbox/id_ed25519" || g.SSHKnownHosts != "/etc/agentbox/known_hosts" || g.Author != "Bot <bot@example.com>" ||
		g.AllowLocal || g.Timeout != 2*time.Minute || g.Hosts != "gitea=git.example.com:8443" ||
		g.Memory != 256<<20 || g.BigFile != 64<<10 || g.Diffs != 4 || g.MaxDiff != 64<<20 {
		t.Errorf("git %+v", g)
	}
	for env, want := range map[string]string{
		"AGENTBOX_GIT_ALLOW_LOCAL": "AGENTBOX_GIT_ALLOW_LOCAL",
		"AGENTBOX_GIT_TIMEOUT":     "AGENTBOX_GIT_TIMEOUT",
		"AGENTBOX_GIT_TOKEN":       "AGENTBOX_GIT_TOKEN",
		"AGENTBOX_GIT_MEMORY":      "AGENTBOX_GIT_MEMORY",
		"AGENTBOX_GIT_BIG_FILE":    "AGENTBOX_GIT_BIG_FILE",
		"AGENTBOX_GIT_DIFFS":       "AGENTBOX_GIT_DIFFS",
		"AGENTBOX_GIT_MAX_DIFF":    "AGENTBOX_GIT_MAX_DIFF",
	} {
		bad := map[string]string{"AGENTBOX_GIT_ALLOW_LOCAL": "maybe", "AGENTBOX_GIT_TIMEOUT": "1ms", "AGENTBOX_GIT_TOKEN": "a b",
			"AGENTBOX_GIT_MEMORY": "1m", "AGENTBOX_GIT_BIG_FILE": "1g",
			"AGENTBOX_GIT_DIFFS": "0", "AGENTBOX_GIT_MAX_DIFF": "64k"}[env]
		if _, err := FromLookup(lookup(map[string]string{env: bad})); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s=%q: %v", env, bad, err)
		}
	}
}
