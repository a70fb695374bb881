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
	"github.com/agentbox/agentbox/internal/connlimit"
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
	over := testenv.DialFrom(t, "127.0.0.1", addr)
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

// healthz asks for /healthz on a connection of its own from from, checks
// the status line and returns the connection, kept alive.
func healthz(t *testing.T, from, addr, want string) net.Conn {
	t.Helper()
	c := testenv.DialFrom(t, from, addr)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != want {
		t.Fatalf("from %s: %q %v; want %q", from, line, err, want)
	}
	return c
}

// pipelined is n GETs of a static asset in a row, for one connection.
func pipelined(addr string, n int) string {
	return strings.Repeat("GET /ui/static/app.css HTTP/1.1\r\nHost: "+addr+"\r\n\r\n", n)
}

// writeTimeout is the write timeout of TestServerDropsClientsThatDoNotRead.
func writeTimeout(c *config.Config) {
	c.Server.HTTP.WriteTimeout, c.Server.HTTP.MaxConnsPerAddr = time.Second, 4
}

// TestServerDropsClientsThatDoNotRead: connections that ask for many
// static assets at once and never read the answers, with a tiny receive
// window, as many as their address may hold, are closed by the server
// once its writes make no progress for the write timeout (the header,
// body and idle timeouts are left long), and the address is served again.
func TestServerDropsClientsThatDoNotRead(t *testing.T) {
	testenv.Docker(t)
	base, srv, _ := serveWith(t, config.RoleAll, "", writeTimeout)
	addr := strings.TrimPrefix(base, "http://")
	const from = "127.0.0.3"
	l := srv.listener.(*connlimit.Listener)
	start := time.Now()
	for range 4 {
		c := testenv.DialTiny(t, from, addr)
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, pipelined(addr, 300)); err != nil {
			t.Fatal(err)
		}
	}
	await(t, "the server holds the stalled connections", func() bool { _, n := l.Conns(&net.TCPAddr{IP: net.ParseIP(from)}); return n == 4 })
	await(t, "the server closes the connections that do not read", func() bool {
		_, n := l.Conns(&net.TCPAddr{IP: net.ParseIP(from)})
		return n == 0
	})
	t.Logf("closed after %v", time.Since(start))
	healthz(t, from, addr, "HTTP/1.1 200 OK")
}

// TestServerKeepsSlowReaders: a client that reads its answers slowly but
// steadily, for several write timeouts, gets them whole.
func TestServerKeepsSlowReaders(t *testing.T) {
	testenv.Docker(t)
	base, _, _ := serveWith(t, config.RoleAll, "", writeTimeout)
	addr := strings.TrimPrefix(base, "http://")
	const n = 150
	c := testenv.DialTiny(t, "127.0.0.1", addr)
	start := time.Now()
	if _, err := io.WriteString(c, pipelined(addr, n)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	for i := range n {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("answer %d of %d, after %v: %v", i+1, n, time.Since(start), err)
		}
		// About 400 KiB/s, 4 KiB at a time: the answers (about 3 MiB) take
		// longer than the server's send buffer holds and several write
		// timeouts.
		for buf := make([]byte, 4<<10); ; time.Sleep(10 * time.Millisecond) {
			if _, err := io.ReadFull(resp.Body, buf); err != nil {
				break
			}
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("answer %d: %s", i+1, resp.Status)
		}
	}
	if took := time.Since(start); took < 3*time.Second {
		t.Errorf("the answers took %v, not three write timeouts: the test reads too fast", took)
	} else {
		t.Logf("read %d answers in %v", n, took)
	}
}
