package connlimit

import (
	"bufio"
	"context"
	"errors"
	"github.com/agentbox/agentbox/internal/testenv"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// serve serves a handler that answers "ok" behind a Listener with cfg on
// a free port of 127.0.0.1.
func serve(t *testing.T, cfg Config) (*Listener, string) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(inner, cfg)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l, inner.Addr().String()
}

// get sends a request on c and returns the answer's status line.
func get(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	return statusLine(t, c)
}

// statusLine reads the status line of the answer waiting on c, without
// sending anything.
func statusLine(t *testing.T, c net.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return strings.TrimSpace(line)
}

// await waits until cond holds.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within 10s", what)
		case <-tick.C:
		}
	}
}

func conns(l *Listener, from string) (total, fromAddr int) {
	return l.Conns(&net.TCPAddr{IP: net.ParseIP(from)})
}

// TestPerAddr: the connection one address opens over its bound is
// answered 503 and closed, another address still gets in, and a closed
// connection frees its place.
func TestPerAddr(t *testing.T) {
	l, addr := serve(t, Config{PerAddr: 3, Total: 100})
	var held []net.Conn
	for range 3 {
		c := testenv.DialFrom(t, "127.0.0.1", addr)
		if s := get(t, c); s != "HTTP/1.1 200 OK" {
			t.Fatalf("within the bound: %q", s)
		}
		held = append(held, c)
	}
	over := testenv.DialFrom(t, "127.0.0.1", addr)
	over.SetReadDeadline(time.Now().Add(5 * time.Second))
	answer, err := io.ReadAll(over) // to its end: the server closes it
	if err != nil || !strings.HasPrefix(string(answer), "HTTP/1.1 503 Service Unavailable\r\n") ||
		!strings.Contains(string(answer), "as many connections as one may (3)") {
		t.Fatalf("over the bound: %q %v; want a 503 with its reason, then the end", answer, err)
	}
	// Go's client reads nothing sent before its request: it gets the 503
	// as the answer to it.
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}).DialContext}}
	resp, err := client.Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("Go's client over the bound: %v; want a 503", err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(msg), "(3)") {
		t.Errorf("Go's client over the bound: %d %q", resp.StatusCode, msg)
	}
	if s := get(t, testenv.DialFrom(t, "127.0.0.2", addr)); s != "HTTP/1.1 200 OK" {
		t.Errorf("another address: %q", s)
	}
	held[0].Close()
	await(t, "a closed connection frees its place", func() bool { _, n := conns(l, "127.0.0.1"); return n == 2 })
	if s := get(t, testenv.DialFrom(t, "127.0.0.1", addr)); s != "HTTP/1.1 200 OK" {
		t.Errorf("after one closed: %q", s)
	}
}

// TestTotal: past the bound of all connections, every address is refused.
func TestTotal(t *testing.T) {
	l, addr := serve(t, Config{PerAddr: 2, Total: 4})
	for _, from := range []string{"127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.3"} {
		if s := get(t, testenv.DialFrom(t, from, addr)); s != "HTTP/1.1 200 OK" {
			t.Fatalf("within the bound: %q", s)
		}
	}
	if s := statusLine(t, testenv.DialFrom(t, "127.0.0.4", addr)); s != "HTTP/1.1 503 Service Unavailable" {
		t.Errorf("over the total: %q", s)
	}
	if total, _ := conns(l, "127.0.0.4"); total != 4 {
		t.Errorf("%d connections counted, want 4", total)
	}
}

// TestHijackedConnFreesItsPlace: a connection a handler took over (a
// WebSocket) counts until it is closed.
func TestHijackedConnFreesItsPlace(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(inner, Config{PerAddr: 1})
	release := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\n\r\n")
		brw.Flush()
		<-release
		c.Close()
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	if s := get(t, testenv.DialFrom(t, "127.0.0.1", inner.Addr().String())); s != "HTTP/1.1 101 Switching Protocols" {
		t.Fatalf("hijack: %q", s)
	}
	if s := statusLine(t, testenv.DialFrom(t, "127.0.0.1", inner.Addr().String())); s != "HTTP/1.1 503 Service Unavailable" {
		t.Errorf("while hijacked: %q", s)
	}
	close(release)
	await(t, "the hijacked connection frees its place", func() bool { total, _ := conns(l, "127.0.0.1"); return total == 0 })
}

func TestAddrKey(t *testing.T) {
	tests := []struct{ a, b string }{
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff::9"},
		{"::ffff:10.0.0.1", "10.0.0.1"},
	}
	for _, tt := range tests {
		a, b := addrKey(&net.TCPAddr{IP: net.ParseIP(tt.a)}), addrKey(&net.TCPAddr{IP: net.ParseIP(tt.b)})
		if a != b {
			t.Errorf("%s counted as %s, %s as %s: want one key", tt.a, a, tt.b, b)
		}
	}
	if addrKey(&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::1")}) == addrKey(&net.TCPAddr{IP: net.ParseIP("2001:db8:1:3::1")}) {
		t.Error("two /64s counted as one")
	}
}

// TestWriteTimeout: a client that never reads holds its connection no
// longer than the write timeout, whether the server answers it or a
// handler took the connection over with its deadlines cleared (a
// WebSocket); the write fails with a timeout and the place is free. A
// handler's sooner deadline still holds, and a client that reads slowly
// but steadily is not cut, however long the response takes.
func TestWriteTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	tests := []struct {
		name    string
		write   func(w http.ResponseWriter) (io.Writer, func())
		reads   bool
		maxOpen time.Duration
	}{
		{"response", func(w http.ResponseWriter) (io.Writer, func()) { return w, func() {} }, false, 3 * time.Second},
		{"hijacked, deadlines cleared", func(w http.ResponseWriter) (io.Writer, func()) {
			rc := http.NewResponseController(w)
			rc.SetWriteDeadline(time.Time{})
			c, _, err := rc.Hijack()
			if err != nil {
				t.Error(err)
				return io.Discard, func() {}
			}
			c.SetDeadline(time.Time{})
			return c, func() { c.Close() }
		}, false, 3 * time.Second},
		{"handler's sooner deadline", func(w http.ResponseWriter) (io.Writer, func()) {
			http.NewResponseController(w).SetWriteDeadline(time.Now().Add(timeout / 3))
			return w, func() {}
		}, false, timeout},
		{"slow reader", func(w http.ResponseWriter) (io.Writer, func()) { return w, func() {} }, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			l := New(inner, Config{WriteTimeout: timeout})
			type result struct {
				n    int
				err  error
				open time.Duration
			}
			done := make(chan result, 1)
			size := 64 << 20 // far more than the buffers of both ends
			if tt.reads {
				size = 8 << 20 // more than the server's send buffer grows to
			}
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				start := time.Now()
				out, end := tt.write(w)
				defer end()
				n, err := out.Write(make([]byte, size))
				done <- result{n, err, time.Since(start)}
			})}
			go srv.Serve(l)
			t.Cleanup(func() { srv.Close() })
			c := testenv.DialTiny(t, "127.0.0.1", inner.Addr().String())
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			if tt.reads {
				// 4 KiB each millisecond or so: the response takes more
				// than three write timeouts, while each write progresses.
				go func() {
					buf := make([]byte, 4<<10)
					for {
						if _, err := c.Read(buf); err != nil {
							return
						}
						time.Sleep(time.Millisecond)
					}
				}()
			}
			var r result
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the write still blocks after 10s")
			}
			if tt.reads {
				if r.err != nil || r.n != size {
					t.Errorf("slow reader: wrote %d of %d in %v: %v", r.n, size, r.open, r.err)
				}
				if r.open < 3*timeout {
					t.Errorf("the slow reader read %d bytes in %v; the test wants it slower", r.n, r.open)
				}
				return
			}
			if !errors.Is(r.err, os.ErrDeadlineExceeded) {
				t.Errorf("the write ended after %d bytes with %v, want a timeout", r.n, r.err)
			}
			if r.open > tt.maxOpen {
				t.Errorf("the write failed after %v, want within %v", r.open, tt.maxOpen)
			}
			await(t, "the stalled connection frees its place", func() bool { total, _ := conns(l, "127.0.0.1"); return total == 0 })
		})
	}
}
