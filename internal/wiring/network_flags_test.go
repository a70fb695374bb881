package wiring

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/jobs"
)

// TestNetworkFlagsPolicy: the flags become the policy, checked against
// the operator's settings; a refusal names the flag that set the field.
func TestNetworkFlagsPolicy(t *testing.T) {
	pypi, _ := egress.ParseRule("pypi.org")
	c := &egress.Config{Presets: map[string][]egress.Rule{"python": {pypi}},
		Secrets: map[string]egress.Secret{"github": {Hosts: []string{"api.github.com"}, Header: "A: {value}", Env: "X"}},
		Modes:   []string{"none", "allow"}, Default: egress.Policy{Mode: "allow", Presets: []string{"python"}}}
	for _, tc := range []struct {
		flags NetworkFlags
		want  string
	}{
		{NetworkFlags{}, `{"mode":"allow","presets":["python"]}`},
		{NetworkFlags{Mode: "none"}, `{"mode":"none"}`},
		{NetworkFlags{Allow: []string{"x.example", "[::1]:8080"}, Deny: []string{"*.ads.example"}, Secrets: []string{"github"}},
			`{"mode":"allow","allow":["x.example","[::1]:8080"],"deny":["*.ads.example"],"secrets":["github"]}`},
	} {
		p, err := tc.flags.Policy(c)
		b, _ := json.Marshal(p)
		if err != nil || string(b) != tc.want {
			t.Errorf("%+v: %s, %v; want %s", tc.flags, b, err, tc.want)
		}
	}
	for _, tc := range []struct {
		flags NetworkFlags
		want  string
	}{
		{NetworkFlags{Presets: []string{"python", "ruby"}}, `--preset: unknown preset "ruby"`},
		{NetworkFlags{Secrets: []string{"gitlab"}}, "--secret: unknown secret"},
		{NetworkFlags{Mode: "open"}, "--network: mode \"open\" is not allowed here"},
		{NetworkFlags{Mode: "bridge"}, `--network "bridge": want none or open`},
		{NetworkFlags{Allow: []string{"a b"}}, "--allow"},
		{NetworkFlags{Deny: []string{"x:0"}}, "--deny"},
		{NetworkFlags{Mode: "none", Presets: []string{"python"}}, "--network: mode none reaches nothing"},
	} {
		_, err := tc.flags.Policy(c)
		if !errors.Is(err, jobs.ErrBadNetwork) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want ErrBadNetwork saying %q", tc.flags, err, tc.want)
		}
	}
}

// TestRunRequestCarriesThePolicy: `agentbox run`'s policy is its job's.
func TestRunRequestCarriesThePolicy(t *testing.T) {
	p, err := NetworkFlags{Allow: []string{"pypi.org"}}.Policy(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Agent.Kind = "shell"
	req, err := RunRequest{Task: "t", Network: p}.submitRequest(cfg)
	if err != nil || req.Network.Mode != "allow" || len(req.Network.Allow) != 1 || req.Network.Allow[0].Host != "pypi.org" {
		t.Errorf("submit request's network %+v, %v", req.Network, err)
	}
}

// TestSandboxFlagsSetNetwork: exec's --network none and open are the
// egress mode, bridge and named networks the container's as before; the
// checked policy is what the sandbox runs with.
func TestSandboxFlagsSetNetwork(t *testing.T) {
	pypi, _ := egress.ParseRule("pypi.org")
	c := &egress.Config{Presets: map[string][]egress.Rule{"python": {pypi}}}
	for _, tc := range []struct {
		network   string
		flags     NetworkFlags
		container string
		policy    string
	}{
		{"", NetworkFlags{}, "", `{"mode":"none"}`},
		{"none", NetworkFlags{}, "none", `{"mode":"none"}`},
		{"open", NetworkFlags{Deny: []string{"10.0.0.0/8"}}, "none", `{"mode":"open","deny":["10.0.0.0/8"]}`},
		{"", NetworkFlags{Allow: []string{"pypi.org"}, Presets: []string{"python"}}, "", `{"mode":"allow","allow":["pypi.org"],"presets":["python"]}`},
		{"bridge", NetworkFlags{}, "bridge", `{"mode":"none"}`},
		{"my-net", NetworkFlags{}, "my-net", `{"mode":"none"}`},
	} {
		f := SandboxFlags{Timeout: time.Minute}
		if err := f.SetNetwork(tc.network, tc.flags, c); err != nil {
			t.Errorf("--network %q %+v: %v", tc.network, tc.flags, err)
			continue
		}
		spec, err := f.Spec()
		b, _ := json.Marshal(f.Network)
		if err != nil || spec.Network != tc.container || string(b) != tc.policy {
			t.Errorf("--network %q %+v: container network %q, policy %s, %v; want %q, %s", tc.network, tc.flags, spec.Network, b, err, tc.container, tc.policy)
		}
	}
	f := SandboxFlags{}
	if err := f.SetNetwork("bridge", NetworkFlags{Allow: []string{"pypi.org"}}, c); err == nil || !strings.Contains(err.Error(), "outside the egress proxy") {
		t.Errorf("--network bridge --allow: %v", err)
	}
}
