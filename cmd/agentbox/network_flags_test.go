package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/wiring"
)

// egressSettings points the configuration at a presets file (python) and
// a secrets file (github), and forbids mode open.
func egressSettings(t *testing.T) *egress.Config {
	t.Helper()
	dir := t.TempDir()
	presets, secrets := filepath.Join(dir, "presets.yaml"), filepath.Join(dir, "secrets.json")
	os.WriteFile(presets, []byte("python:\n  - pypi.org\n  - files.pythonhosted.org\n"), 0o600)
	os.WriteFile(secrets, []byte(`{"github": {"hosts": ["api.github.com"], "header": "Authorization: Bearer {value}", "env": "GH_TOKEN"}}`), 0o600)
	t.Setenv("AGENTBOX_EGRESS_PRESETS", presets)
	t.Setenv("AGENTBOX_EGRESS_SECRETS", secrets)
	t.Setenv("AGENTBOX_EGRESS_MODES", "none,allow")
	cfg, err := config.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	pc, err := wiring.EgressPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

// TestSubmitNetworkFlags: the network flags become the submission's
// policy, the server keeps it, and status shows it on one line.
func TestSubmitNetworkFlags(t *testing.T) {
	e := clientEnv(t)
	e.Configure(func(c *jobs.ServiceConfig) { c.Egress = egressSettings(t) })
	out, _ := mustRun(t, "submit", "--allow", "news.ycombinator.com", "--allow", "*.example.org:8443", "--deny", "ads.example.org",
		"--preset", "python", "--secret", "github", "scrape it")
	id := strings.TrimSpace(out)
	j, err := e.Svc.Get(context.Background(), id)
	if want := `{"mode":"allow","allow":["news.ycombinator.com","*.example.org:8443"],"deny":["ads.example.org"],"presets":["python"],"secrets":["github"]}`; err != nil || string(j.Network) != want {
		t.Errorf("job's network %s, %v; want %s", j.Network, err, want)
	}
	out, _ = mustRun(t, "status", id)
	if want := "allow news.ycombinator.com, *.example.org:8443; deny ads.example.org; presets python; secrets github"; !strings.Contains(out, "network:") || !strings.Contains(out, want) {
		t.Errorf("status lacks %q:\n%s", want, out)
	}
	out, _ = mustRun(t, "submit", "no flags")
	if j, _ := e.Svc.Get(context.Background(), strings.TrimSpace(out)); string(j.Network) != `{"mode":"none"}` {
		t.Errorf("no flags: network %s", j.Network)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--preset", "ruby"}, `network.presets[0]: unknown preset "ruby" (known: python)`},
		{[]string{"--network", "open"}, "network.mode"},
		{[]string{"--allow", "bad host"}, "--allow"},
		{[]string{"--network", "bridge"}, "--network"},
	} {
		_, _, err := runClient(context.Background(), "", append(append([]string{"submit"}, tc.args...), "x")...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("submit %v: %v; want it to say %q", tc.args, err, tc.want)
		}
	}
}

// TestLocalNetworkFlagsRefused: exec, run and chat check the policy
// against the operator's settings before anything starts, and a refusal
// names the flag and exits 2.
func TestLocalNetworkFlagsRefused(t *testing.T) {
	egressSettings(t)
	t.Setenv("AGENTBOX_DATA_DIR", t.TempDir())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"exec", "--preset", "ruby", "true"}, `--preset: unknown preset "ruby"`},
		{[]string{"exec", "--secret", "gitlab", "true"}, `--secret: unknown secret "gitlab"`},
		{[]string{"exec", "--network", "open", "true"}, `--network: mode "open" is not allowed here`},
		{[]string{"exec", "--network", "none", "--allow", "pypi.org", "true"}, "--network: mode none reaches nothing"},
		{[]string{"exec", "--allow", "pypi.org:http", "true"}, "--allow"},
		{[]string{"run", "--preset", "ruby", "task"}, `--preset: unknown preset "ruby"`},
		{[]string{"run", "--network", "sometimes", "task"}, `--network "sometimes": want none or open`},
		{[]string{"chat", "--deny", "*", "--allow", "x.example"}, "--deny"},
	} {
		_, _, err := run(context.Background(), tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || exitCodeOf(err) != 2 {
			t.Errorf("%v: %v (exit %d); want exit 2 saying %q", tc.args, err, exitCodeOf(err), tc.want)
		}
	}
	_, _, err := run(context.Background(), "exec", "--network", "bridge", "--allow", "pypi.org", "true")
	if err == nil || !strings.Contains(err.Error(), "outside the egress proxy") {
		t.Errorf("exec --network bridge --allow: %v", err)
	}
}
