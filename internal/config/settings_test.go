package config

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSettingsDoc: the settings table of docs/configuration.md is the one
// Settings makes; run `go run ./internal/config/gendoc` after changing it.
func TestSettingsDoc(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := ReplaceTable(string(b), SettingsTable())
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Error("docs/configuration.md's settings table and config.Settings disagree: run go run ./internal/config/gendoc")
	}
}

// TestDefaultsAsBefore: the defaults the table makes are those agentbox
// had before the table (written out here once more, on purpose).
func TestDefaultsAsBefore(t *testing.T) {
	got := Default()
	want := Config{
		DataDir: defaultDataDir(),
		Sandbox: Sandbox{
			Image: "agentbox-sandbox:latest", MemoryBytes: 2 << 30, NanoCPUs: 1e9, PidsLimit: 512, Network: "none", Instance: "default",
			DisplayWidth: 1024, DisplayHeight: 768, DiskBytes: 10 << 30, NoFile: 1024, UIDs: UIDRange{200000, 299999},
			MinFreeDisk: 2 << 30, MinFreeInodes: 200_000, Ceilings: hostCeilings(),
			Driver: "docker", GuestTransport: "unix", Isolation: "container",
		},
		Server: Server{
			Addr: "127.0.0.1:8080", Concurrency: 2, Lease: 30 * time.Second, JobTimeout: 30 * time.Minute, MaxAttempts: 3,
			Grace: 30 * time.Second, Retention: 7 * 24 * time.Hour, MaxUpload: 1 << 30, LiveOutputMax: 8 << 20,
			HTTP: HTTP{HeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, BodyTimeout: 30 * time.Second,
				WriteTimeout: time.Minute, MinUploadRate: 32 << 10, MaxConnsPerAddr: 128, MaxConns: 4096},
		},
		Role:   RoleAll,
		Client: Client{URL: "http://127.0.0.1:8080"},
		Agent:  Agent{Kind: "model", MaxSteps: 100},
		Git: Git{TokenUser: "x-access-token", Author: "agentbox <agentbox@localhost>", AllowLocal: true, Timeout: 10 * time.Minute,
			Memory: 1 << 30, BigFile: 1 << 20, Diffs: 2, MaxDiff: 256 << 20},
		Egress: Egress{Bytes: 10 << 30, Conns: 64, Idle: 2 * time.Minute},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Default()\n got %+v\nwant %+v", got, want)
	}
}

// TestEverySettingRead: each setting's variable is read into its field,
// parsed as before; a setting added to the table without a case here
// fails.
func TestEverySettingRead(t *testing.T) {
	cases := []struct {
		env, value string
		ok         func(c Config) bool
	}{
		{"AGENTBOX_DATA_DIR", "/srv/agentbox", func(c Config) bool { return c.DataDir == "/srv/agentbox" }},
		{"AGENTBOX_STORE", "postgres://db/agentbox", func(c Config) bool { return c.Store == "postgres://db/agentbox" }},
		{"AGENTBOX_ROLE", "api", func(c Config) bool { return c.Role == "api" }},
		{"AGENTBOX_BLOBS", "/mnt/blobs", func(c Config) bool { return c.Blobs == "/mnt/blobs" }},
		{"AGENTBOX_CLUSTER_SECRET", strings.Repeat("s", 32), func(c Config) bool { return c.Cluster.Secret == strings.Repeat("s", 32) }},
		{"AGENTBOX_ADVERTISE_ADDR", "w1:8080", func(c Config) bool { return c.Cluster.AdvertiseAddr == "w1:8080" }},
		{"AGENTBOX_DRIVER", "microvm", func(c Config) bool { return c.Sandbox.Driver == "microvm" }},
		{"AGENTBOX_GUEST_TRANSPORT", "tcp", func(c Config) bool { return c.Sandbox.GuestTransport == "tcp" }},
		{"AGENTBOX_ISOLATION", "gvisor", func(c Config) bool { return c.Sandbox.Isolation == "gvisor" }},
		{"AGENTBOX_IMAGE", "img:v1", func(c Config) bool { return c.Sandbox.Image == "img:v1" }},
		{"AGENTBOX_IMAGES", "a, docker.io/library/b", func(c Config) bool { return slices.Equal(c.Sandbox.Images, []string{"a:latest", "b:latest"}) }},
		{"AGENTBOX_SANDBOX_MEMORY", "512m", func(c Config) bool { return c.Sandbox.MemoryBytes == 512<<20 }},
		{"AGENTBOX_SANDBOX_CPUS", "0.5", func(c Config) bool { return c.Sandbox.NanoCPUs == 5e8 }},
		{"AGENTBOX_SANDBOX_PIDS", "256", func(c Config) bool { return c.Sandbox.PidsLimit == 256 }},
		{"AGENTBOX_SANDBOX_DISK", "5g", func(c Config) bool { return c.Sandbox.DiskBytes == 5<<30 }},
		{"AGENTBOX_SANDBOX_NOFILE", "2048", func(c Config) bool { return c.Sandbox.NoFile == 2048 }},
		{"AGENTBOX_SANDBOX_UIDS", "500000-500100", func(c Config) bool { return c.Sandbox.UIDs == UIDRange{500000, 500100} }},
		{"AGENTBOX_MIN_FREE_DISK", "1g", func(c Config) bool { return c.Sandbox.MinFreeDisk == 1<<30 }},
		{"AGENTBOX_MIN_FREE_INODES", "1000", func(c Config) bool { return c.Sandbox.MinFreeInodes == 1000 }},
		{"AGENTBOX_RETENTION", "0", func(c Config) bool { return c.Server.Retention == 0 }},
		{"AGENTBOX_MAX_UPLOAD", "2g", func(c Config) bool { return c.Server.MaxUpload == 2<<30 }},
		{"AGENTBOX_LIVE_OUTPUT_MAX", "1m", func(c Config) bool { return c.Server.LiveOutputMax == 1<<20 }},
		{"AGENTBOX_CEILING_MEMORY", "64g", func(c Config) bool { return c.Sandbox.Ceilings.MemoryBytes == 64<<30 }},
		{"AGENTBOX_CEILING_CPUS", "1.5", func(c Config) bool { return c.Sandbox.Ceilings.NanoCPUs == 15e8 }},
		{"AGENTBOX_CEILING_PIDS", "8192", func(c Config) bool { return c.Sandbox.Ceilings.PidsLimit == 8192 }},
		{"AGENTBOX_CEILING_DISK", "200g", func(c Config) bool { return c.Sandbox.Ceilings.DiskBytes == 200<<30 }},
		{"AGENTBOX_CEILING_TIMEOUT", "2h", func(c Config) bool { return c.Sandbox.Ceilings.Timeout == 2*time.Hour }},
		{"AGENTBOX_CEILING_STEPS", "500", func(c Config) bool { return c.Sandbox.Ceilings.MaxSteps == 500 }},
		{"AGENTBOX_SANDBOX_NETWORK", "bridge", func(c Config) bool { return c.Sandbox.Network == "bridge" }},
		{"AGENTBOX_GUEST_BINARY", "/opt/agentbox", func(c Config) bool { return c.Sandbox.GuestBinary == "/opt/agentbox" }},
		{"AGENTBOX_DISPLAY_SIZE", "1280x800", func(c Config) bool { return c.Sandbox.DisplayWidth == 1280 && c.Sandbox.DisplayHeight == 800 }},
		{"AGENTBOX_INSTANCE", "ci", func(c Config) bool { return c.Sandbox.Instance == "ci" }},
		{"DOCKER_HOST", "unix:///run/podman/podman.sock", func(c Config) bool { return c.Docker.Host == "unix:///run/podman/podman.sock" }},
		{"AGENTBOX_ADDR", "127.0.0.1:9090", func(c Config) bool { return c.Server.Addr == "127.0.0.1:9090" }},
		{"AGENTBOX_TOKEN", "tok", func(c Config) bool { return c.Server.Token == "tok" && c.Client.Token == "tok" }},
		{"AGENTBOX_TOKEN_FILE", "/etc/tok", func(c Config) bool { return c.Server.TokenFile == "/etc/tok" }},
		{"AGENTBOX_VIEW_URL", "https://{job}.v.example", func(c Config) bool { return c.Server.ViewURL == "https://{job}.v.example" }},
		{"AGENTBOX_VIEWER_KEY_FILE", "/etc/vk", func(c Config) bool { return c.Server.ViewerKeyFile == "/etc/vk" }},
		{"AGENTBOX_PUBLIC_URL", "https://a.example", func(c Config) bool { return c.Server.PublicURL == "https://a.example" }},
		{"AGENTBOX_HTTP_HEADER_TIMEOUT", "5s", func(c Config) bool { return c.Server.HTTP.HeaderTimeout == 5*time.Second }},
		{"AGENTBOX_HTTP_IDLE_TIMEOUT", "1m", func(c Config) bool { return c.Server.HTTP.IdleTimeout == time.Minute }},
		{"AGENTBOX_HTTP_BODY_TIMEOUT", "10s", func(c Config) bool { return c.Server.HTTP.BodyTimeout == 10*time.Second }},
		{"AGENTBOX_HTTP_MIN_UPLOAD_RATE", "64k", func(c Config) bool { return c.Server.HTTP.MinUploadRate == 64<<10 }},
		{"AGENTBOX_HTTP_WRITE_TIMEOUT", "2m", func(c Config) bool { return c.Server.HTTP.WriteTimeout == 2*time.Minute }},
		{"AGENTBOX_HTTP_MAX_CONNS_PER_ADDR", "0", func(c Config) bool { return c.Server.HTTP.MaxConnsPerAddr == 0 }},
		{"AGENTBOX_HTTP_MAX_CONNS", "1000", func(c Config) bool { return c.Server.HTTP.MaxConns == 1000 }},
		{"AGENTBOX_NO_AUTH", "true", func(c Config) bool { return c.Server.NoAuth }},
		{"AGENTBOX_URL", "http://127.0.0.1:9", func(c Config) bool { return c.Client.URL == "http://127.0.0.1:9" }},
		{"AGENTBOX_CONCURRENCY", "0", func(c Config) bool { return c.Server.Concurrency == 0 }},
		{"AGENTBOX_LEASE", "1m", func(c Config) bool { return c.Server.Lease == time.Minute }},
		{"AGENTBOX_JOB_TIMEOUT", "1h", func(c Config) bool { return c.Server.JobTimeout == time.Hour }},
		{"AGENTBOX_MAX_ATTEMPTS", "5", func(c Config) bool { return c.Server.MaxAttempts == 5 }},
		{"AGENTBOX_GRACE", "0", func(c Config) bool { return c.Server.Grace == 0 }},
		{"AGENTBOX_MODEL", "openai:gpt-4.1", func(c Config) bool { return c.Model.Name == "openai:gpt-4.1" }},
		{"ANTHROPIC_API_KEY", "ak", func(c Config) bool { return c.Model.AnthropicKey == "ak" }},
		{"ANTHROPIC_BASE_URL", "http://127.0.0.1:1", func(c Config) bool { return c.Model.AnthropicBaseURL == "http://127.0.0.1:1" }},
		{"OPENAI_API_KEY", "ok", func(c Config) bool { return c.Model.OpenAIKey == "ok" }},
		{"OPENAI_BASE_URL", "http://127.0.0.1:2", func(c Config) bool { return c.Model.OpenAIBaseURL == "http://127.0.0.1:2" }},
		{"AGENTBOX_AGENT", "shell", func(c Config) bool { return c.Agent.Kind == "shell" }},
		{"AGENTBOX_MAX_STEPS", "7", func(c Config) bool { return c.Agent.MaxSteps == 7 }},
		{"AGENTBOX_MAX_TOKENS", "100000", func(c Config) bool { return c.Agent.MaxTokens == 100000 }},
		{"AGENTBOX_MAX_COST", "2.50", func(c Config) bool { return c.Agent.MaxCostUSD == 2.5 }},
		{"AGENTBOX_CONTEXT_WINDOW", "32000", func(c Config) bool { return c.Agent.ContextWindow == 32000 }},
		{"AGENTBOX_GIT_TOKEN", "ghp", func(c Config) bool { return c.Git.Token == "ghp" }},
		{"AGENTBOX_GIT_TOKEN_USER", "bot", func(c Config) bool { return c.Git.TokenUser == "bot" }},
		{"AGENTBOX_GIT_TOKEN_HOSTS", "a.example, b.example:8443", func(c Config) bool { return slices.Equal(c.Git.TokenHosts, []string{"a.example", "b.example:8443"}) }},
		{"AGENTBOX_GIT_SSH_KEY", "/k", func(c Config) bool { return c.Git.SSHKey == "/k" }},
		{"AGENTBOX_GIT_SSH_KNOWN_HOSTS", "/kh", func(c Config) bool { return c.Git.SSHKnownHosts == "/kh" }},
		{"AGENTBOX_GIT_AUTHOR", "Bot <bot@example.com>", func(c Config) bool { return c.Git.Author == "Bot <bot@example.com>" }},
		{"AGENTBOX_GIT_ALLOW_LOCAL", "0", func(c Config) bool { return !c.Git.AllowLocal }},
		{"AGENTBOX_GIT_TIMEOUT", "2m", func(c Config) bool { return c.Git.Timeout == 2*time.Minute }},
		{"AGENTBOX_GIT_MEMORY", "256m", func(c Config) bool { return c.Git.Memory == 256<<20 }},
		{"AGENTBOX_GIT_BIG_FILE", "64k", func(c Config) bool { return c.Git.BigFile == 64<<10 }},
		{"AGENTBOX_GIT_DIFFS", "4", func(c Config) bool { return c.Git.Diffs == 4 }},
		{"AGENTBOX_GIT_MAX_DIFF", "64m", func(c Config) bool { return c.Git.MaxDiff == 64<<20 }},
		{"AGENTBOX_GIT_HOSTS", " gitea=git.example.com ", func(c Config) bool { return c.Git.Hosts == "gitea=git.example.com" }},
		{"AGENTBOX_EGRESS_PRESETS", " /p.yaml", func(c Config) bool { return c.Egress.Presets == "/p.yaml" }},
		{"AGENTBOX_EGRESS_SECRETS", "/s.json ", func(c Config) bool { return c.Egress.Secrets == "/s.json" }},
		{"AGENTBOX_EGRESS_DEFAULT", `{"mode":"open"}`, func(c Config) bool { return c.Egress.Default == `{"mode":"open"}` }},
		{"AGENTBOX_EGRESS_MODES", "none,allow", func(c Config) bool { return c.Egress.Modes == "none,allow" }},
		{"AGENTBOX_EGRESS_ALLOW_PRIVATE", "10.0.0.0/8", func(c Config) bool { return c.Egress.AllowPrivate == "10.0.0.0/8" }},
		{"AGENTBOX_EGRESS_RESOLVE", "m.internal=10.0.0.5", func(c Config) bool { return c.Egress.Resolve == "m.internal=10.0.0.5" }},
		{"AGENTBOX_EGRESS_CA", "/ca.pem", func(c Config) bool { return c.Egress.CA == "/ca.pem" }},
		{"AGENTBOX_EGRESS_BYTES", "1g", func(c Config) bool { return c.Egress.Bytes == 1<<30 }},
		{"AGENTBOX_EGRESS_CONNS", "8", func(c Config) bool { return c.Egress.Conns == 8 }},
		{"AGENTBOX_EGRESS_IDLE", "30s", func(c Config) bool { return c.Egress.Idle == 30*time.Second }},
	}
	tested := map[string]bool{}
	for _, tc := range cases {
		tested[tc.env] = true
		env := map[string]string{tc.env: tc.value}
		if tc.env == "AGENTBOX_ROLE" { // an API replica needs a shared store
			env["AGENTBOX_STORE"] = "postgres://db/agentbox"
		}
		c, err := FromLookup(lookup(env))
		if err != nil || !tc.ok(c) {
			t.Errorf("%s=%q: not read as before (%v)", tc.env, tc.value, err)
		}
		// Empty is unset: the default stays.
		if c, err := FromLookup(lookup(map[string]string{tc.env: ""})); err != nil || !reflect.DeepEqual(c, Default()) {
			t.Errorf("%s empty: %v, or not the defaults", tc.env, err)
		}
	}
	for _, s := range Settings {
		if !tested[s.Env] {
			t.Errorf("setting %s has no case in TestEverySettingRead", s.Env)
		}
		if s.Help == "" && !s.SameRow {
			t.Errorf("setting %s has no help", s.Env)
		}
	}
	if len(tested) != len(Settings) {
		t.Errorf("%d cases, %d settings: a case names no setting", len(tested), len(Settings))
	}
}

// TestApplyFlags: a flag given wins over the environment; one given a
// zero value leaves the setting alone, unless zero is a value of it.
func TestApplyFlags(t *testing.T) {
	env := map[string]string{"AGENTBOX_ADDR": "127.0.0.1:9000", "AGENTBOX_LEASE": "1m", "AGENTBOX_CONCURRENCY": "4", "AGENTBOX_GRACE": "10s", "AGENTBOX_NO_AUTH": "1"}
	c, err := FromLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]string{"--addr": "127.0.0.1:9001", "--lease": "0", "--concurrency": "0", "--grace": "0", "--no-auth": "false", "--job-timeout": "1h30m", "--store": ""}
	if err := ApplyFlags(&c, func(name string) (string, bool) { v, ok := flags[name]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	s := c.Server
	if s.Addr != "127.0.0.1:9001" || s.Lease != time.Minute || s.Concurrency != 0 || s.Grace != 0 || !s.NoAuth || s.JobTimeout != 90*time.Minute || c.Store != "" {
		t.Fatalf("applied: %+v store %q", s, c.Store)
	}
}
