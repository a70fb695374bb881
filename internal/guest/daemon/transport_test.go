package daemon_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon"
	"github.com/agentbox/agentbox/internal/guest/daemon/daemontest"
)

// serveTCP serves a guest that requires secret on a loopback TCP port.
func serveTCP(t *testing.T, secret string) (addr, ws string) {
	t.Helper()
	ws = t.TempDir()
	l, err := daemon.Listen(guest.Listener{Network: "tcp", Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	daemontest.Serve(t, l, daemon.Config{Workspace: ws, Version: "test", Secret: secret})
	return l.Addr().String(), ws
}

func TestTCPNeedsTheSandboxSecret(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	addr, ws := serveTCP(t, secret)
	ctx := context.Background()

	good := guest.New(guest.TCPDialer(addr), secret)
	defer good.Close()
	if res := sh(t, good, "echo hi > made-by-host"); res.ExitCode != 0 {
		t.Fatalf("exec with the secret: %+v", res)
	}

	for name, c := range map[string]*guest.Client{
		"no secret":    guest.New(guest.TCPDialer(addr), ""),
		"wrong secret": guest.New(guest.TCPDialer(addr), strings.ToUpper(secret)),
		"prefix":       guest.New(guest.TCPDialer(addr), secret[:16]),
	} {
		t.Run(name, func(t *testing.T) {
			defer c.Close()
			_, err := c.Exec(ctx, guest.Shell("touch made-without-secret"))
			var ge *guest.Error
			if !errors.As(err, &ge) || ge.Code != guest.CodeUnauthorized {
				t.Fatalf("exec: err %v, want a %s guest error", err, guest.CodeUnauthorized)
			}
			if _, err := c.WriteFile(ctx, "written-without-secret", []byte("x"), 0); err == nil {
				t.Fatal("write without the secret succeeded")
			}
			if _, err := c.Health(ctx); err == nil {
				t.Fatal("health without the secret answered")
			}
		})
	}
	for _, name := range []string{"made-without-secret", "written-without-secret"} {
		if _, err := os.Stat(filepath.Join(ws, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists (stat: %v): a request without the secret did something", name, err)
		}
	}

	// The status is 401 on the wire, whatever the route.
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/files/list?path=.", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("plain GET: status %d, want 401", resp.StatusCode)
	}
}

// TestVsock listens on a vsock port and dials one. Where the kernel has no
// vsock transport that loops back (no vsock_loopback, no guest-to-self),
// a connection cannot be made on one machine; the dialer must then fail
// within its deadline instead of hanging.
func TestVsock(t *testing.T) {
	l, err := daemon.Listen(guest.Listener{Network: "vsock", Addr: "50123"})
	if err != nil {
		t.Skipf("no vsock on this machine: %v", err)
	}
	accepted := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	begin := time.Now()
	c, err := guest.VsockDialer(1, 50123)(ctx) // CID 1: this machine, through vsock_loopback
	if err == nil {
		c.Close()
		if err := <-accepted; err != nil {
			t.Fatalf("accept: %v", err)
		}
		l.Close()
		return
	}
	if took := time.Since(begin); took > 3*time.Second {
		t.Errorf("vsock dial failed after %v, past its 2s deadline", took)
	}
	l.Close()
	if err := <-accepted; !errors.Is(err, net.ErrClosed) {
		t.Errorf("accept after close: %v, want net.ErrClosed", err)
	}
	t.Logf("vsock listens, but cannot loop back here: %v", err)
}
