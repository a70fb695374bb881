package config

import (
	"strings"
	"testing"
)

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestFromEnv(t *testing.T) {
	c, err := fromLookup(lookup(map[string]string{
		"AGENTBOX_DATA_DIR":       "/srv/agentbox",
		"AGENTBOX_SANDBOX_MEMORY": "512m",
		"AGENTBOX_SANDBOX_CPUS":   "0.5",
		"AGENTBOX_SANDBOX_PIDS":   "64",
		"DOCKER_HOST":             "unix:///run/podman/podman.sock",
		"ANTHROPIC_API_KEY":       "k",
		"AGENTBOX_DISPLAY_SIZE":   "1280x800",
		"AGENTBOX_PUBLIC_URL":     "https://agentbox.example.com",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/srv/agentbox" || c.Sandbox.MemoryBytes != 512<<20 || c.Sandbox.NanoCPUs != 5e8 ||
		c.Sandbox.PidsLimit != 64 || c.Docker.Host != "unix:///run/podman/podman.sock" || c.Model.AnthropicKey != "k" ||
		c.Sandbox.DisplayWidth != 1280 || c.Sandbox.DisplayHeight != 800 || c.Server.PublicURL != "https://agentbox.example.com" {
		t.Errorf("config %+v", c)
	}
}

func TestDefaults(t *testing.T) {
	c, err := fromLookup(lookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sandbox
	if s.MemoryBytes != 2<<30 || s.NanoCPUs != 1e9 || s.PidsLimit != 512 || s.Network != "none" || s.Image != DefaultImage ||
		s.DisplayWidth != 1024 || s.DisplayHeight != 768 {
		t.Errorf("defaults %+v", s)
	}
}

func TestInvalid(t *testing.T) {
	tests := map[string]struct {
		env  map[string]string
		want string
	}{
		"memory words":      {map[string]string{"AGENTBOX_SANDBOX_MEMORY": "lots"}, "AGENTBOX_SANDBOX_MEMORY"},
		"memory tiny":       {map[string]string{"AGENTBOX_SANDBOX_MEMORY": "1m"}, "at least 64MiB"},
		"cpus zero":         {map[string]string{"AGENTBOX_SANDBOX_CPUS": "0"}, "AGENTBOX_SANDBOX_CPUS"},
		"pids few":          {map[string]string{"AGENTBOX_SANDBOX_PIDS": "3"}, "at least 16"},
		"host network":      {map[string]string{"AGENTBOX_SANDBOX_NETWORK": "host"}, "are refused"},
		"container network": {map[string]string{"AGENTBOX_SANDBOX_NETWORK": "container:x"}, "are refused"},
		"bad instance":      {map[string]string{"AGENTBOX_INSTANCE": "a b"}, "instance"},
		"display words":     {map[string]string{"AGENTBOX_DISPLAY_SIZE": "big"}, "WIDTHxHEIGHT"},
		"display tiny":      {map[string]string{"AGENTBOX_DISPLAY_SIZE": "10x10"}, "320x200"},
		"public URL path":   {map[string]string{"AGENTBOX_PUBLIC_URL": "https://example.com/agentbox"}, "without a path"},
		"public URL scheme": {map[string]string{"AGENTBOX_PUBLIC_URL": "ftp://example.com"}, "public URL"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := fromLookup(lookup(tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
