package docker_test

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
	"github.com/agentbox/agentbox/internal/sandbox/docker"
	"github.com/agentbox/agentbox/internal/sandbox/sandboxtest"
	"github.com/agentbox/agentbox/internal/testenv"
)

var _ sandbox.HostPather = (*docker.Driver)(nil)

// tcpTransport makes the driver reach guests over TCP, which needs root.
func tcpTransport(t *testing.T) func(*docker.Config) {
	t.Helper()
	if os.Geteuid() != 0 {
		if testenv.DockerRequired() {
			t.Fatal("the tcp guest transport needs root (CI runs as root)")
		}
		t.Skip("skipping: the tcp guest transport enters sandboxes' network namespaces, which needs root")
	}
	return func(c *docker.Config) { c.Transport = sandbox.TransportTCP }
}

// TestConformanceTCP runs the suite with every guest reached over TCP in
// its sandbox's network namespace, each request carrying the secret.
func TestConformanceTCP(t *testing.T) {
	d := newDriver(t, tcpTransport(t))
	if c := d.Capabilities(); c.Transport != sandbox.TransportTCP {
		t.Fatalf("capabilities %+v", c)
	}
	sandboxtest.Run(t, d)
}

// TestTCPGuestNeedsItsSecret: a request to a sandbox's guest over TCP,
// dialed as the host dials it (from inside the sandbox's network
// namespace), gets 401 and does nothing without the sandbox's secret or
// with a wrong one.
func TestTCPGuestNeedsItsSecret(t *testing.T) {
	d := newDriver(t, tcpTransport(t))
	ctx := context.Background()
	s, err := d.Create(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy(ctx)
	st := stateOf(t, s)
	if b, err := hex.DecodeString(st.Secret); err != nil || len(b) < 16 || st.Transport != sandbox.TransportTCP {
		t.Fatalf("state: transport %q, a secret of %d hex characters (%v)", st.Transport, len(st.Secret), err)
	}
	other, err := d.Create(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Destroy(ctx)
	dial := docker.NetnsDialer(d, st.Ref, st.GuestAddr)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }}}
	for name, secret := range map[string]string{"none": "", "wrong": strings.Repeat("0", len(st.Secret)),
		"another sandbox's": stateOf(t, other).Secret, "a prefix": st.Secret[:16]} {
		for _, req := range []*http.Request{
			newRequest(t, "GET", "/health", ""),
			newRequest(t, "POST", "/exec", `{"cmd":["touch","/workspace/ran"]}`),
		} {
			if secret != "" {
				req.Header.Set(guest.SecretHeader, secret)
			}
			code, body := do(t, hc, req)
			if code != http.StatusUnauthorized || !strings.Contains(body, `"unauthorized"`) {
				t.Errorf("%s secret, %s %s: %d %s, want 401", name, req.Method, req.URL.Path, code, body)
			}
		}
	}
	if _, err := s.Guest().Stat(ctx, "ran"); !errors.Is(err, guest.ErrNotFound) {
		t.Errorf("a refused exec ran: stat %v", err)
	}
	req := newRequest(t, "GET", "/health", "")
	req.Header.Set(guest.SecretHeader, st.Secret)
	if code, body := do(t, hc, req); code != http.StatusOK {
		t.Errorf("with the secret: %d %s", code, body)
	}
	if _, err := os.Lstat(filepath.Join(st.StateDir, "run", "guest.secret")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the secret's file is still in the sandbox's state dir: %v", err)
	}
	info, err := d.Client().ContainerInspect(ctx, st.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if seen := strings.Join(append(append(info.Config.Cmd, info.Config.Env...), info.Args...), " "); strings.Contains(seen, st.Secret) {
		t.Error("the secret is in the container's command line or environment")
	}
	for k, v := range info.Config.Labels {
		if strings.Contains(v, st.Secret) {
			t.Errorf("the secret is in the container's label %s", k)
		}
	}
}

func newRequest(t *testing.T, method, path, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, "http://guest"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func do(t *testing.T, hc *http.Client, req *http.Request) (int, string) {
	t.Helper()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

// TestTransportAndNetworkChecks: the driver refuses, at New, a guest
// transport it does not know and a network mode that shares a namespace
// (checks that were config's before the Docker driver owned them).
func TestTransportAndNetworkChecks(t *testing.T) {
	for name, mod := range map[string]func(*docker.Config){
		"vsock transport":   func(c *docker.Config) { c.Transport = "vsock" },
		"host network":      func(c *docker.Config) { c.Network = "host" },
		"container network": func(c *docker.Config) { c.Network = "container:x" },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := docker.Config{Host: "unix:///nonexistent/docker.sock", Image: "x", GuestBinary: guestBinary, StateDir: t.TempDir(), Instance: "x"}
			mod(&cfg)
			_, err := docker.New(cfg)
			if !errors.Is(err, sandbox.ErrInvalidSpec) {
				t.Fatalf("err = %v, want ErrInvalidSpec", err)
			}
			if strings.Contains(name, "network") && !strings.Contains(err.Error(), "are refused") {
				t.Errorf("err = %v, want it to say what is refused", err)
			}
		})
	}
}
