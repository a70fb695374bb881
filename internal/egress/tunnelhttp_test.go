package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/proxy"
)

// front is a plain HTTP server routing by Host, as a CDN's front does: it
// counts the requests that reached evil.test.
func front(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var evil atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.Host)
		if host == "" {
			host = r.Host
		}
		if host == "evil.test" {
			evil.Add(1)
		}
		io.WriteString(w, "site "+host)
	}))
	t.Cleanup(srv.Close)
	return srv, &evil
}

// TestTunnelledHTTPFronting: an allowed tunnel (CONNECT or SOCKS5) to a
// plain HTTP front does not carry a request for another host, by its
// Host header, an absolute URI or a second pipelined request; requests for
// the tunnel's host go through, one after the other.
func TestTunnelledHTTPFronting(t *testing.T) {
	srv, evil := front(t)
	p := port(t, srv)
	h := newHarness(t, policy(t, `{"allow": ["example.com:`+p+`"]}`), Options{})
	connect := func(t *testing.T) net.Conn {
		c, err := net.Dial("tcp", h.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "CONNECT example.com:%s HTTP/1.1\r\nHost: example.com:%s\r\n\r\n", p, p)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 || br.Buffered() != 0 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		return c
	}
	socks := func(t *testing.T) net.Conn {
		d, err := proxy.SOCKS5("tcp", h.ln.Addr().String(), nil, proxy.Direct)
		if err != nil {
			t.Fatal(err)
		}
		c, err := d.Dial("tcp", "example.com:"+p)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// Each ends with a request for evil.test that closes the connection.
	attacks := []string{
		"GET / HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n",
		"GET http://evil.test/ HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n",
		"\r\nget  /  HTTP/1.1\r\nHost: evil.test:" + p + "\r\nConnection: close\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: example.com\r\n\r\nGET / HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n",
		"GET /" + strings.Repeat("a", 5000) + " HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nGET / HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n",
	}
	for name, open := range map[string]func(*testing.T) net.Conn{"connect": connect, "socks5": socks} {
		for i, attack := range attacks {
			t.Run(fmt.Sprintf("%s/%d", name, i), func(t *testing.T) {
				c := open(t)
				defer c.Close()
				io.WriteString(c, attack)
				io.ReadAll(c) // until the proxy ends the tunnel
			})
		}
		t.Run(name+"/same host", func(t *testing.T) {
			c := open(t)
			defer c.Close()
			io.WriteString(c, "GET /a HTTP/1.1\r\nHost: example.com:"+p+"\r\n\r\nGET http://EXAMPLE.com./b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			b, _ := io.ReadAll(c)
			if n := strings.Count(strings.ToLower(string(b)), "site example.com"); n != 2 {
				t.Fatalf("%d answers from example.com, want 2: %q", n, b)
			}
		})
	}
	if n := evil.Load(); n != 0 {
		t.Fatalf("evil.test reached %d times through a tunnel to example.com", n)
	}
	evs := h.exactly(2*len(attacks) + 2)
	allowed := 0
	for _, ev := range evs {
		switch {
		case ev.Decision == "allow" && ev.Error == "":
			allowed++
		case ev.Decision != "deny" || !strings.Contains(ev.Reason, "inside the tunnel"):
			t.Errorf("event %+v, want a denial of what is inside the tunnel", ev)
		}
	}
	if allowed != 2 {
		t.Fatalf("%d tunnels allowed, want 2: %+v", allowed, evs)
	}
}

// TestTunnelledOtherProtocols: a tunnel whose client speaks first in
// another protocol (a binary startup message, an SSH banner, a line that
// is no request) is passed on at once, not held for a request line.
func TestTunnelledOtherProtocols(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	h := newHarness(t, policy(t, `{"allow": ["example.com:`+p+`"]}`), Options{})
	d, err := proxy.SOCKS5("tcp", h.ln.Addr().String(), nil, proxy.Direct)
	if err != nil {
		t.Fatal(err)
	}
	for _, first := range []string{"\x00\x00\x00\x08\x04\xd2\x16\x2f", "SSH-2.0-OpenSSH_9.6 Debian\r\n", "PING\r\n", "hello world\n"} {
		c, err := d.Dial("tcp", "example.com:"+p)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(helloTimeout / 2))
		io.WriteString(c, first)
		got := make([]byte, len(first))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != first {
			t.Errorf("%q: echoed %q, %v", first, got, err)
		}
		c.Close()
	}
}
