package wiring

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/egress"
)

// egressFromEnv is the configuration env makes (config.FromLookup) and
// its egress settings, read and checked as serve reads them.
func egressFromEnv(env map[string]string) (config.Config, egress.Loaded, error) {
	c, err := config.FromLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return c, egress.Loaded{}, err
	}
	l, err := loadEgress(c)
	return c, l, err
}

func TestEgressDefaults(t *testing.T) {
	c, l, err := egressFromEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	e := c.Egress
	if e.Bytes != 10<<30 || e.Conns != 64 || e.Idle != 2*time.Minute || l.Roots != nil || len(l.AllowPrivate) != 0 || len(l.Resolve) != 0 {
		t.Errorf("defaults %+v", e)
	}
	p, err := l.Policy.Check(egress.Policy{})
	if err != nil || p.Mode != egress.ModeNone {
		t.Errorf("a job stating no policy gets %+v, %v; want mode none", p, err)
	}
	if _, err := l.Policy.Check(egress.Policy{Mode: "open"}); err != nil {
		t.Errorf("every mode is allowed by default: %v", err)
	}
}

// TestEgressFromEnv reads every setting from files in both forms the
// presets take, and checks the default policy against them.
func TestEgressFromEnv(t *testing.T) {
	dir := t.TempDir()
	presets := write(t, dir, "presets.yaml", "python:\n  - pypi.org\n  - files.pythonhosted.org\nreadonly:\n  - host: api.example\n    methods: [get, HEAD]\n")
	secrets := write(t, dir, "secrets.json", `{"github": {"hosts": ["api.github.com"], "header": "Authorization: Bearer {value}", "env": "GH_TOKEN"},
		"mirror": {"hosts": ["*.mirror.internal:8443"], "header": "X-Key: {value}", "file": "/etc/agentbox/mirror.key"}}`)
	def := write(t, dir, "default.json", `{"presets": ["python"], "deny": ["evil.example"]}`)
	c, l, err := egressFromEnv(map[string]string{
		"AGENTBOX_EGRESS_PRESETS": presets, "AGENTBOX_EGRESS_SECRETS": secrets, "AGENTBOX_EGRESS_DEFAULT": "@" + def,
		"AGENTBOX_EGRESS_MODES": "none, allow", "AGENTBOX_EGRESS_ALLOW_PRIVATE": "10.1.0.0/16,127.0.0.1, fd00::/8",
		"AGENTBOX_EGRESS_RESOLVE": "mirror.internal=10.1.2.3,Mirror.Internal=10.1.2.4,pypi.test=127.0.0.1",
		"AGENTBOX_EGRESS_CA":      write(t, dir, "ca.pem", testCAPEM(t)), "AGENTBOX_EGRESS_BYTES": "1g", "AGENTBOX_EGRESS_CONNS": "8",
		"AGENTBOX_EGRESS_IDLE": "30s",
	})
	if err != nil {
		t.Fatal(err)
	}
	e := c.Egress
	pc := l.Policy
	if got := pc.Presets["python"]; len(got) != 2 || got[0].String() != "pypi.org" || got[1].String() != "files.pythonhosted.org" {
		t.Errorf("preset python %v", got)
	}
	if got := pc.Presets["readonly"]; len(got) != 1 || !slices.Equal(got[0].Methods, []string{"GET", "HEAD"}) {
		t.Errorf("preset readonly %+v", got)
	}
	if s := pc.Secrets["github"]; s.Env != "GH_TOKEN" || s.Header != "Authorization: Bearer {value}" || pc.Secrets["mirror"].File != "/etc/agentbox/mirror.key" {
		t.Errorf("secrets %+v", pc.Secrets)
	}
	if !slices.Equal(pc.Modes, []string{"none", "allow"}) {
		t.Errorf("modes %v", pc.Modes)
	}
	if d := pc.Default; d.Mode != egress.ModeAllow || !slices.Equal(d.Presets, []string{"python"}) || len(d.Deny) != 1 {
		t.Errorf("default %+v", d)
	}
	wantPfx := []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("fd00::/8")}
	if !slices.Equal(l.AllowPrivate, wantPfx) {
		t.Errorf("allow private %v", l.AllowPrivate)
	}
	if got := l.Resolve["mirror.internal"]; !slices.Equal(got, []netip.Addr{netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("10.1.2.4")}) || len(l.Resolve) != 2 {
		t.Errorf("resolve %v", l.Resolve)
	}
	if l.Roots == nil || e.Bytes != 1<<30 || e.Conns != 8 || e.Idle != 30*time.Second {
		t.Errorf("roots %v bytes %d conns %d idle %v", l.Roots != nil, e.Bytes, e.Conns, e.Idle)
	}
	if _, err := pc.Check(egress.Policy{Mode: "open"}); err == nil {
		t.Error("mode open passed though AGENTBOX_EGRESS_MODES forbids it")
	}
	// The same presets as JSON, and an inline default.
	c, l, err = egressFromEnv(map[string]string{
		"AGENTBOX_EGRESS_PRESETS": write(t, dir, "presets.json", `{"node": ["registry.npmjs.org"]}`),
		"AGENTBOX_EGRESS_DEFAULT": `{"mode": "none"}`,
	})
	if err != nil || len(l.Policy.Presets["node"]) != 1 || l.Policy.Default.Mode != "none" {
		t.Errorf("JSON presets: %+v, %v", l.Policy, err)
	}
}

// TestEgressBadSettings: each bad setting stops the start, naming its
// variable; a secret's value is never read at start.
func TestEgressBadSettings(t *testing.T) {
	dir := t.TempDir()
	n := 0
	secret := func(body string) string {
		n++
		return write(t, dir, fmt.Sprintf("s%d.json", n), `{"gh": `+body+`}`)
	}
	for _, tc := range []struct {
		name, env, value, want string
	}{
		{"preset entry", "AGENTBOX_EGRESS_PRESETS", write(t, dir, "p1.yaml", "python:\n  - 'bad host!'\n"), `preset "python" entry 0`},
		{"preset shape", "AGENTBOX_EGRESS_PRESETS", write(t, dir, "p2.yaml", "python: pypi.org\n"), "want"},
		{"preset file missing", "AGENTBOX_EGRESS_PRESETS", filepath.Join(dir, "none.yaml"), "no such file"},
		{"secret bad host", "AGENTBOX_EGRESS_SECRETS", secret(`{"hosts": ["a b"], "header": "A: {value}", "env": "X"}`), "hosts[0]"},
		{"secret no value", "AGENTBOX_EGRESS_SECRETS", secret(`{"hosts": ["a.example"], "header": "Authorization: Bearer", "env": "X"}`), "header"},
		{"secret no name", "AGENTBOX_EGRESS_SECRETS", secret(`{"hosts": ["a.example"], "header": "{value}", "env": "X"}`), "header"},
		{"secret env and file", "AGENTBOX_EGRESS_SECRETS", secret(`{"hosts": ["a.example"], "header": "A: {value}", "env": "X", "file": "/x"}`), "exactly one"},
		{"secret neither", "AGENTBOX_EGRESS_SECRETS", secret(`{"hosts": ["a.example"], "header": "A: {value}"}`), "exactly one"},
		{"secret unknown field", "AGENTBOX_EGRESS_SECRETS", secret(`{"hosts": ["a.example"], "header": "A: {value}", "env": "X", "value": "x"}`), "unknown field"},
		{"mode", "AGENTBOX_EGRESS_MODES", "none,closed", `"closed"`},
		{"private", "AGENTBOX_EGRESS_ALLOW_PRIVATE", "10.0.0.0/33", "CIDR"},
		{"resolve", "AGENTBOX_EGRESS_RESOLVE", "mirror=not-an-ip", "not an IP"},
		{"resolve no =", "AGENTBOX_EGRESS_RESOLVE", "mirror", "name=address"},
		{"ca", "AGENTBOX_EGRESS_CA", write(t, dir, "ca.txt", "not a certificate"), "no PEM"},
		{"default unknown preset", "AGENTBOX_EGRESS_DEFAULT", `{"presets": ["python"]}`, "presets[0]"},
		{"default bad JSON", "AGENTBOX_EGRESS_DEFAULT", `{"mode": "none"`, "want a policy"},
		{"default entry", "AGENTBOX_EGRESS_DEFAULT", `{"allow": ["bad host"]}`, "want a policy"},
		{"bytes", "AGENTBOX_EGRESS_BYTES", "1k", "AGENTBOX_EGRESS_BYTES"},
		{"conns", "AGENTBOX_EGRESS_CONNS", "0", "AGENTBOX_EGRESS_CONNS"},
		{"idle", "AGENTBOX_EGRESS_IDLE", "10ms", "AGENTBOX_EGRESS_IDLE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := egressFromEnv(map[string]string{tc.env: tc.value})
			if err == nil || !strings.Contains(err.Error(), tc.env) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s=%q: %v; want an error naming %s and %q", tc.env, tc.value, err, tc.env, tc.want)
			}
		})
	}
	// A forbidden default mode is refused too.
	_, _, err := egressFromEnv(map[string]string{"AGENTBOX_EGRESS_MODES": "allow", "AGENTBOX_EGRESS_DEFAULT": `{"mode": "none"}`})
	if err == nil || !strings.Contains(err.Error(), "AGENTBOX_EGRESS_DEFAULT") {
		t.Errorf("default mode none with modes allow: %v", err)
	}
}

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// testCAPEM is a self-signed CA certificate, PEM-encoded.
func testCAPEM(t *testing.T) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "agentbox test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// TestCheckConfig: the git author and hosts, which config keeps as text,
// are read where they are used, and a bad one stops the start naming its
// variable as before.
func TestCheckConfig(t *testing.T) {
	c, err := config.FromLookup(func(k string) (string, bool) {
		v, ok := map[string]string{"AGENTBOX_GIT_HOSTS": "gitea=git.example.com:8443"}[k]
		return v, ok
	})
	if err != nil || CheckConfig(c) != nil {
		t.Fatal(err, CheckConfig(c))
	}
	if hosts, err := forgeHosts(c.Git); err != nil || len(hosts) != 2 || hosts[0].APIBase != "https://git.example.com:8443/api/v1" {
		t.Errorf("hosts %+v, %v", hosts, err)
	}
	for env, bad := range map[string]string{"AGENTBOX_GIT_AUTHOR": "nobody", "AGENTBOX_GIT_HOSTS": "github=ghe.example.com=http://ghe.example.com/api/v3"} {
		c, err := config.FromLookup(func(k string) (string, bool) { return bad, k == env })
		if err == nil {
			err = CheckConfig(c)
		}
		if err == nil || !strings.Contains(err.Error(), env) {
			t.Errorf("%s=%q: %v", env, bad, err)
		}
	}
}
