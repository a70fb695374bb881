package wiring

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/testenv"
)

// short are HTTP bounds a test outlives many times over.
func short(c *config.Config) {
	h := &c.Server.HTTP
	h.HeaderTimeout, h.IdleTimeout, h.BodyTimeout = 400*time.Millisecond, 400*time.Millisecond, 400*time.Millisecond
}

// openFor connects to addr from the loopback address from, sends head and
// then trickle one byte each 50ms, and returns what the server answered
// once it closed the connection, and when. The test gives up long before
// the trickle would end: a server that waits for it fails.
func openFor(t *testing.T, from, addr, head, trickle string) (answer string, open time.Duration) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	io.WriteString(c, head)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < len(trickle); i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := c.Write([]byte{trickle[i]}); err != nil {
				return
			}
		}
	}()
	c.SetReadDeadline(start.Add(5 * time.Second))
	b, err := io.ReadAll(c) // to its end: the server closes the connection
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("still open after %v: %v (answered %q)", time.Since(start), err, b)
	}
	return string(b), time.Since(start)
}

// TestServerBoundsSlowClients: against the server serve runs, a request's
// headers, its body and a kept-alive connection's wait for the next one
// are each cut at their setting, whichever route (before auth, or a
// worker's internal endpoint).
func TestServerBoundsSlowClients(t *testing.T) {
	testenv.Docker(t)
	base, _, _ := serveWith(t, config.RoleAll, "", short)
	addr := strings.TrimPrefix(base, "http://")
	body := strings.Repeat("x", 400) // 20s at a byte each 50ms
	tests := []struct {
		name, head, trickle, want string
	}{
		{"slow body, sign-in", "POST /ui/login HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 400\r\n\r\n", body, "HTTP/1.1 4"},
		{"slow body, submission", "POST /v1/jobs HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + roleToken + "\r\nContent-Length: 400\r\n\r\n", body, "HTTP/1.1 408 Request Timeout"},
		{"slow headers", "GET /healthz HTTP/1.1\r\n", "Host: " + addr + strings.Repeat("x", 400), ""},
		{"idle keep-alive", "GET /healthz HTTP/1.1\r\nHost: " + addr + "\r\n\r\n", "", "HTTP/1.1 200 OK"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answer, open := openFor(t, "127.0.0.1", addr, tt.head, tt.trickle)
			if !strings.HasPrefix(answer, tt.want) {
				t.Errorf("answered %q, want %q", answer, tt.want)
			}
			t.Logf("closed after %v", open)
		})
	}
}

// TestWorkerBoundsSlowBodies: a worker's internal endpoint, which anyone
// on its network can reach before the cluster secret is checked, cuts a
// slow body too.
func TestWorkerBoundsSlowBodies(t *testing.T) {
	base, _, _ := serveWith(t, config.RoleWorker, testenv.Postgres(t), short)
	addr := strings.TrimPrefix(base, "http://")
	head := "POST /internal/v1/jobs/job_x/guest/proxy/jupyter/api/contents HTTP/1.1\r\nHost: " + addr + "\r\nContent-Length: 400\r\n\r\n"
	answer, open := openFor(t, "127.0.0.1", addr, head, strings.Repeat("x", 400))
	if !strings.HasPrefix(answer, "HTTP/1.1 401") {
		t.Errorf("answered %q, want 401", answer)
	}
	t.Logf("closed after %v", open)
}

// TestServerBoundsConnsPerAddr: one address's connection over its bound is
// refused at once with a 503, another loopback address still gets in, and
// so does the first once it closed one.
func TestServerBoundsConnsPerAddr(t *testing.T) {
	testenv.Docker(t)
	base, _, _ := serveWith(t, config.RoleAll, "", func(c *config.Config) { c.Server.HTTP.MaxConnsPerAddr = 8 })
	addr := strings.TrimPrefix(base, "http://")
	var held []net.Conn
	for range 8 {
		c := healthz(t, "127.0.0.1", addr, "HTTP/1.1 200 OK")
		held = append(held, c)
	}
	over := dialFrom(t, "127.0.0.1", addr)
	over.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(over); err != nil || !strings.HasPrefix(string(b), "HTTP/1.1 503 Service Unavailable") {
		t.Errorf("the 9th connection: %q %v; want a 503, then the end", b, err)
	}
	healthz(t, "127.0.0.2", addr, "HTTP/1.1 200 OK")
	held[0].Close()
	await(t, "a closed connection frees its place", func() bool {
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// dialFrom connects to addr from the loopback address from.
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// healthz asks for /healthz on a connection of its own from from, checks
// the status line and returns the connection, kept alive.
func healthz(t *testing.T, from, addr, want string) net.Conn {
	t.Helper()
	c := dialFrom(t, from, addr)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != want {
		t.Fatalf("from %s: %q %v; want %q", from, line, err, want)
	}
	return c
}
