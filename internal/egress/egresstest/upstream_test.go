package egresstest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestUpstream fetches each thing the server serves by a name pinned to
// 127.0.0.1, trusting only its CA: the fixtures the sandboxes' tests rely
// on work on the host.
func TestUpstream(t *testing.T) {
	u := Start(t, "pypi.test")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(u.CAPEM)
	pinned := func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, _ := net.SplitHostPort(addr)
		return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DialContext: pinned}}
	base := "https://pypi.test:" + strconv.Itoa(u.Port)
	if idx := get(t, c, base+"/simple/tinypkg/"); !strings.Contains(idx, base+"/packages/tinypkg-1.0-py3-none-any.whl#sha256=") {
		t.Fatalf("index: %s", idx)
	}
	if whl := get(t, c, base+"/packages/tinypkg-1.0-py3-none-any.whl"); whl != string(u.Wheel) {
		t.Fatalf("wheel: %d bytes, want %d", len(whl), len(u.Wheel))
	}
	if meta := get(t, c, base+"/npm/tinypkg"); !strings.Contains(meta, base+"/npm/tinypkg/-/tinypkg-1.0.0.tgz") {
		t.Fatalf("npm metadata: %s", meta)
	}
	if big := get(t, c, base+"/big?bytes=1000000"); len(big) != 1000000 {
		t.Fatalf("big: %d bytes", len(big))
	}
	plain := "http://pypi.test:" + strconv.Itoa(u.HTTPPort)
	if got := get(t, c, plain+"/"); got != "hello from pypi.test:"+strconv.Itoa(u.HTTPPort)+" GET\n" {
		t.Fatalf("plain: %q", got)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dst := filepath.Join(t.TempDir(), "clone")
	cmd := exec.Command("git", "clone", "-q",
		"https://127.0.0.1:"+strconv.Itoa(u.Port)+"/git/repo.git", dst)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_SSL_CAINFO="+u.CAFile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "README.md")); string(b) != "hello from git\n" {
		t.Fatalf("README.md: %q", b)
	}
}

func get(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	return string(b)
}
