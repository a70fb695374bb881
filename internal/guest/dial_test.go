package guest_test

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

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon"
	"github.com/agentbox/agentbox/internal/guest/daemon/daemontest"
)

// shortDir is a fresh directory with a short path: unix socket paths are
// limited to 108 bytes.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "abd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// serveGuest serves a guest on the socket at path until the test ends.
func serveGuest(t *testing.T, path string) {
	t.Helper()
	daemontest.ServeUnix(t, path, daemon.Config{Workspace: t.TempDir(), Version: "test"})
}

// canary is a listening unix socket the host must never connect to.
type canary struct {
	path string
	l    *net.UnixListener
}

func newCanary(t *testing.T) *canary {
	t.Helper()
	path := filepath.Join(shortDir(t), "canary.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &canary{path: path, l: l}
}

// untouched fails the test if anyone connected to the canary. A connect
// completes into the listen backlog before the caller returns, so a short
// deadline finds any connection already made.
func (c *canary) untouched(t *testing.T) {
	t.Helper()
	c.l.SetDeadline(time.Now().Add(100 * time.Millisecond))
	conn, err := c.l.Accept()
	if err == nil {
		conn.Close()
		t.Fatal("the host connected to the canary socket")
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("canary accept: %v", err)
	}
}

// quick bounds a call that, without the fix, would wait on a canary that
// never answers.
func quick(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestClientConnectsBeneathItsDir(t *testing.T) {
	root := shortDir(t)
	if err := os.Mkdir(filepath.Join(root, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	serveGuest(t, filepath.Join(root, "run", guest.SocketName))
	c := guest.NewClientAt(root, filepath.Join("run", guest.SocketName))
	defer c.Close()
	if _, err := c.Handshake(quick(t)); err != nil {
		t.Fatal(err)
	}
}

// The socket is reached through its descriptor, so a path over the 108
// bytes of sun_path works too.
func TestClientReachesSocketBeyondSunPathLimit(t *testing.T) {
	short := shortDir(t)
	serveGuest(t, filepath.Join(short, guest.SocketName))
	root := shortDir(t)
	deep := filepath.Join(strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(filepath.Join(root, deep), 0o700); err != nil {
		t.Fatal(err)
	}
	rel := filepath.Join(deep, guest.SocketName)
	if err := os.Rename(filepath.Join(short, guest.SocketName), filepath.Join(root, rel)); err != nil {
		t.Fatal(err)
	}
	c := guest.NewClientAt(root, rel)
	defer c.Close()
	if _, err := c.Health(quick(t)); err != nil {
		t.Fatal(err)
	}
}

// TestClientRefusesUnsafeSocket plants, where the guest's socket should be,
// what a sandbox could: every call must fail with ErrUnsafeSocket and the
// canary (a socket elsewhere on the host) see no connection.
func TestClientRefusesUnsafeSocket(t *testing.T) {
	cases := map[string]func(t *testing.T, run string, c *canary){
		"link to a host socket": func(t *testing.T, run string, c *canary) {
			symlink(t, c.path, filepath.Join(run, guest.SocketName))
		},
		"relative link": func(t *testing.T, run string, c *canary) {
			rel, err := filepath.Rel(run, c.path)
			if err != nil {
				t.Fatal(err)
			}
			symlink(t, rel, filepath.Join(run, guest.SocketName))
		},
		"regular file": func(t *testing.T, run string, _ *canary) {
			if err := os.WriteFile(filepath.Join(run, guest.SocketName), []byte("x"), 0o666); err != nil {
				t.Fatal(err)
			}
		},
		"FIFO": func(t *testing.T, run string, _ *canary) {
			if err := unix.Mkfifo(filepath.Join(run, guest.SocketName), 0o666); err != nil {
				t.Fatal(err)
			}
		},
		"directory": func(t *testing.T, run string, _ *canary) {
			if err := os.Mkdir(filepath.Join(run, guest.SocketName), 0o777); err != nil {
				t.Fatal(err)
			}
		},
		"linked run dir": func(t *testing.T, run string, c *canary) {
			// The canary's directory holds a socket of the right name.
			symlink(t, c.path, filepath.Join(filepath.Dir(c.path), guest.SocketName))
			if err := os.Remove(run); err != nil {
				t.Fatal(err)
			}
			symlink(t, filepath.Dir(c.path), run)
		},
	}
	for name, plant := range cases {
		t.Run(name, func(t *testing.T) {
			root := shortDir(t)
			run := filepath.Join(root, "run")
			if err := os.Mkdir(run, 0o777); err != nil {
				t.Fatal(err)
			}
			can := newCanary(t)
			plant(t, run, can)
			c := guest.NewClientAt(root, filepath.Join("run", guest.SocketName))
			defer c.Close()
			checkRefused(t, c)
			can.untouched(t)
		})
	}
}

// The socket may be swapped while the client holds connections to the real
// guest: Health, the watchdog's check, must still look at the socket.
func TestHealthRefusesSocketSwappedAfterConnecting(t *testing.T) {
	root := shortDir(t)
	run := filepath.Join(root, "run")
	if err := os.Mkdir(run, 0o777); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(run, guest.SocketName)
	serveGuest(t, sock)
	c := guest.NewClientAt(root, filepath.Join("run", guest.SocketName))
	defer c.Close()
	if res, err := c.Exec(quick(t), guest.Shell("true")); err != nil || res.ExitCode != 0 {
		t.Fatalf("exec before the swap: %+v, %v", res, err)
	}
	can := newCanary(t)
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	symlink(t, can.path, sock)
	_, err := c.Health(quick(t))
	if !errors.Is(err, guest.ErrUnsafeSocket) {
		t.Fatalf("health after the swap: %v, want ErrUnsafeSocket", err)
	}
	can.untouched(t)
}

// checkRefused calls the guest the ways the host does (health, a call, a
// proxied viewer request) and wants each refused as unsafe.
func checkRefused(t *testing.T, c *guest.Client) {
	t.Helper()
	_, err := c.Health(quick(t))
	if !errors.Is(err, guest.ErrUnsafeSocket) {
		t.Errorf("health: %v, want ErrUnsafeSocket", err)
	} else if !strings.Contains(err.Error(), "run/"+guest.SocketName) && !strings.Contains(err.Error(), "run is") {
		t.Errorf("health: %q does not name the socket", err)
	}
	if _, err := c.Exec(quick(t), guest.Shell("true")); !errors.Is(err, guest.ErrUnsafeSocket) {
		t.Errorf("exec: %v, want ErrUnsafeSocket", err)
	}
	req, _ := http.NewRequestWithContext(quick(t), http.MethodPost, "http://guest/proxy/desktop/x", strings.NewReader("{}"))
	if resp, err := c.Transport().RoundTrip(req); !errors.Is(err, guest.ErrUnsafeSocket) {
		if err == nil {
			resp.Body.Close()
		}
		t.Errorf("proxied request: %v, want ErrUnsafeSocket", err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
