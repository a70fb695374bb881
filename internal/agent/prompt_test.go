package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/egress"
)

func rule(t *testing.T, s string) egress.Rule {
	t.Helper()
	r, err := egress.ParseRule(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSystemPromptNetwork: the system prompt tells the model what the
// job's policy lets it reach and how, instead of always "no network".
func TestSystemPromptNetwork(t *testing.T) {
	get := rule(t, "api.example")
	get.Methods = []string{"GET", "HEAD"}
	tests := []struct {
		name        string
		e           egress.Effective
		want, never []string
	}{
		{"zero", egress.Effective{}, []string{"The sandbox has no network access: packages cannot be downloaded."}, []string{"HTTP_PROXY"}},
		{"none", egress.Effective{Mode: egress.ModeNone, Allow: []egress.Rule{rule(t, "a.test")}},
			[]string{"no network access"}, []string{"a.test", "proxy"}},
		{"allow", egress.Effective{Mode: egress.ModeAllow, Allow: []egress.Rule{rule(t, "pypi.example"), rule(t, "*.example.org"), rule(t, "git.example:22"), get}},
			[]string{"You can reach only these hosts through the HTTP(S) proxy already set in the environment (HTTP_PROXY, HTTPS_PROXY; ALL_PROXY socks5h for other TCP): pypi.example, *.example.org, git.example:22, api.example (GET, HEAD only)",
				"Anything else is refused by the proxy.", "DNS is not available inside"},
			[]string{"no network access", "Credentials"}},
		{"open", egress.Effective{Mode: egress.ModeOpen, Deny: []egress.Rule{rule(t, "evil.example")}},
			[]string{"You can reach any public host through the HTTP(S) proxy", "except private, loopback and link-local addresses and these denied hosts: evil.example."},
			[]string{"no network access"}},
		{"secrets", egress.Effective{Mode: egress.ModeAllow, Allow: []egress.Rule{rule(t, "api.github.com:443")}, Secrets: map[string]egress.Secret{
			"github": {Hosts: []string{"api.github.com"}, Env: "GH_TOKEN"},
			"npm":    {Hosts: []string{"registry.npmjs.example", "npm.example"}, File: "/etc/npm", Placeholder: "NPM_TOKEN"},
			"pypi":   {Hosts: []string{"pypi.example"}, File: "/etc/pypi"},
		}},
			[]string{"Credentials for api.github.com are added by the proxy; the environment variable GH_TOKEN holds only a placeholder: use it as if it were the token.",
				"Credentials for registry.npmjs.example, npm.example are added by the proxy; the environment variable NPM_TOKEN holds",
				"the environment variable PYPI holds only a placeholder"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := SystemPrompt(tt.e)
			for _, w := range tt.want {
				if !strings.Contains(p, w) {
					t.Errorf("prompt lacks %q:\n%s", w, p)
				}
			}
			for _, n := range tt.never {
				if strings.Contains(p, n) {
					t.Errorf("prompt has %q:\n%s", n, p)
				}
			}
			if !strings.Contains(p, "Installed: Python 3 with pip") {
				t.Errorf("prompt lost what is installed:\n%s", p)
			}
		})
	}
}

// TestSystemPromptHostsCapped: a long allow list is cut, saying how many
// more hosts it has, so a policy cannot fill the model's context.
func TestSystemPromptHostsCapped(t *testing.T) {
	e := egress.Effective{Mode: egress.ModeAllow}
	for i := range 250 {
		e.Allow = append(e.Allow, rule(t, fmt.Sprintf("h%d.example", i)))
	}
	p := NetworkPrompt(e)
	if !strings.Contains(p, "h39.example and 210 more") || strings.Contains(p, "h40.example") {
		t.Errorf("allow list not capped at %d:\n%s", promptHosts, p)
	}
}
