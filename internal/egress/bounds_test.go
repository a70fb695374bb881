package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeTerminator keeps what it was handed, checks two requests against
// the policy, reports one and answers the client "terminated".
type fakeTerminator struct {
	mu       sync.Mutex
	got      Termination
	get      Decision
	post     Decision
	upRemote string
}

func (f *fakeTerminator) Terminate(ctx context.Context, client net.Conn, t Termination) error {
	f.mu.Lock()
	f.got = t
	f.get, f.post = t.Decide("GET", "/a"), t.Decide("POST", "/a")
	f.upRemote = t.Upstream.RemoteAddr().String()
	f.mu.Unlock()
	t.Seen("GET", "/a")
	_, err := io.WriteString(client, "terminated")
	client.Close()
	t.Upstream.Close()
	return err
}

func TestTerminatedHostHandedOver(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(hello))
	defer srv.Close()
	p := port(t, srv)
	cases := []struct{ name, policy, secret string }{
		{"methods", `{"allow": [{"host": "example.com:` + p + `", "methods": ["GET"]}]}`, ""},
		{"secret", `{"secrets": ["gh"]}`, "gh"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ft := &fakeTerminator{}
			cfg := &Config{Secrets: map[string]Secret{"gh": {Hosts: []string{"example.com:" + p}, Header: "Authorization: Bearer {value}"}}}
			pol := policyIn(t, cfg, tc.policy)
			h := newHarness(t, pol, Options{Config: cfg, Terminator: ft})
			c, err := net.Dial("tcp", h.ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "CONNECT example.com:%s HTTP/1.1\r\nHost: example.com:%s\r\n\r\n", p, p)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("CONNECT: %v %v", resp, err)
			}
			if rest, _ := io.ReadAll(br); string(rest) != "terminated" {
				t.Fatalf("client got %q", rest)
			}
			ev := h.exactly(1)[0]
			ft.mu.Lock()
			defer ft.mu.Unlock()
			if ft.got.Host != "example.com" || ft.got.Port != srv.Listener.Addr().(*net.TCPAddr).Port || ft.got.Secret != tc.secret || ft.upRemote != srv.Listener.Addr().String() {
				t.Fatalf("termination %+v to %s", ft.got, ft.upRemote)
			}
			if !ft.get.Allowed || ft.post.Allowed != (tc.secret != "") {
				t.Fatalf("decisions GET %+v POST %+v", ft.get, ft.post)
			}
			if ev.Decision != "allow" || ev.Method != "GET" || ev.Path != "/a" || ev.Secret != tc.secret {
				t.Fatalf("event %+v", ev)
			}
		})
	}
}

func TestSOCKS5Refusals(t *testing.T) {
	h := newHarness(t, policy(t, `{"mode": "open"}`), Options{})
	cases := []struct {
		name  string
		req   []byte
		reply byte
	}{
		{"bind command", []byte{5, 2, 0, 1, 127, 0, 0, 1, 0, 80}, socksBadCommand},
		{"unknown address type", []byte{5, 1, 0, 9}, socksBadAddress},
		{"ipv6 loopback", append(append([]byte{5, 1, 0, 4}, net.IPv6loopback...), 0, 80), socksRuleset},
		{"metadata", []byte{5, 1, 0, 1, 169, 254, 169, 254, 0, 80}, socksRuleset},
		{"unresolvable", append(append([]byte{5, 1, 0, 3, 12}, "nothere.test"...), 0, 80), socksHostUnreachable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", h.ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Write([]byte{5, 1, 0})
			c.Write(tc.req)
			got := make([]byte, 12)
			n, _ := io.ReadAtLeast(c, got, 4)
			if n < 4 || got[0] != 5 || got[1] != 0 || got[2] != 5 || got[3] != tc.reply {
				t.Fatalf("got % x, want reply %#x", got[:n], tc.reply)
			}
		})
	}
	// nothere.test has no pin and the harness's resolver answers nothing.
	evs := h.exactly(len(cases))
	for _, ev := range evs {
		if ev.Decision != "deny" || ev.Protocol != "socks5" {
			t.Fatalf("event %+v", ev)
		}
	}
}

// TestFlood: streams past the connection bound and past those being told
// so cost no more than a closed socket; memory and goroutines come back.
func TestFlood(t *testing.T) {
	base := runtime.NumGoroutine()
	h := newHarness(t, policy(t, `{"mode": "open"}`), Options{Conns: 4})
	const n = 4 + maxRefusing + 300
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("tcp", h.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c) // says nothing
	}
	// The last ones are closed unread, at once; the others within 2 s.
	closed := 0
	for _, c := range conns[n-100:] {
		c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(make([]byte, 1)); err == io.EOF {
			closed++
		}
	}
	if closed < 90 {
		t.Fatalf("%d of the last 100 streams closed at once", closed)
	}
	await(t, "busy streams answered", func() bool {
		h.p.mu.Lock()
		defer h.p.mu.Unlock()
		return h.p.refusing == 0 && h.p.active == 4
	})
	for _, c := range conns {
		c.Close()
	}
	h.close()
	evs := h.events
	if len(evs) < maxRefusing || len(evs) > n {
		t.Fatalf("%d events for %d streams", len(evs), n)
	}
	if !strings.Contains(evs[len(evs)-1].Reason, "more than 4 connections at once") {
		t.Fatalf("last event %+v", evs[len(evs)-1])
	}
	await(t, "goroutines back to their number before", func() bool { return runtime.NumGoroutine() <= base+2 })
}

func TestMetrics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(hello))
	defer srv.Close()
	p := port(t, srv)
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	h := newHarness(t, policy(t, `{"allow": ["example.com:`+p+`"]}`), Options{Metrics: m})
	c := h.client(nil)
	get(t, c, "GET", "http://example.com:"+p+"/")
	get(t, c, "GET", "http://late.test:"+p+"/")
	h.exactly(2)
	in, out := h.p.Bytes()
	want := map[string]float64{
		`agentbox_egress_connections_total{decision="allow"}`: 1,
		`agentbox_egress_connections_total{decision="deny"}`:  1,
		`agentbox_egress_bytes_total{direction="in"}`:         float64(in),
		`agentbox_egress_bytes_total{direction="out"}`:        float64(out),
		`agentbox_egress_active_connections`:                  0,
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetName() + "=\"" + l.GetValue() + "\"}"
			}
			got[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	if in == 0 || out == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("metrics %v, want %v", got, want)
	}
}

// TestCloseEndsTunnels: Close ends an open tunnel, whose event says so,
// and Denials keeps only what was refused since the time asked.
func TestCloseEndsTunnels(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		b := make([]byte, 8)
		io.ReadFull(c, b)
		got <- string(b)
		io.Copy(io.Discard, c)
		c.Close()
	}()
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	h := newHarness(t, policy(t, `{"allow": ["example.com:`+p+`"]}`), Options{})
	c := h.client(nil)
	get(t, c, "GET", "http://first.test/")
	mid := time.Now()
	get(t, c, "GET", "http://second.test/")
	if ds := h.p.Denials(mid); len(ds) != 1 || ds[0].Host != "second.test" {
		t.Fatalf("denials since: %+v", ds)
	}
	if ds := h.p.Denials(time.Time{}); len(ds) != 2 {
		t.Fatalf("all denials: %+v", ds)
	}
	conn, err := net.Dial("tcp", h.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "CONNECT example.com:%s HTTP/1.1\r\nHost: example.com:%s\r\n\r\n", p, p)
	br := bufio.NewReader(conn)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	// Neither TLS nor an HTTP request line (which the proxy would read
	// as requests): a byte no request line starts with.
	io.WriteString(conn, "\x00not TLS")
	if s := <-got; s != "\x00not TLS" {
		t.Fatalf("upstream got %q", s)
	}
	h.p.Close()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after Close: %v", err)
	}
	evs := h.exactly(3)
	if ev := evs[2]; ev.Decision != "allow" || ev.Error != errClosed.Error() || ev.BytesOut != int64(len("\x00not TLS")) {
		t.Fatalf("event %+v", ev)
	}
}

// TestStreamedResponse: a response's parts reach the client as the
// server sends them, not when a buffer fills; a request's body follows
// the proxy's own 100 Continue.
func TestStreamedResponse(t *testing.T) {
	next := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" {
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "got %s, expect %q", b, r.Header.Get("Expect"))
			return
		}
		io.WriteString(w, "first;")
		w.(http.Flusher).Flush()
		<-next
		io.WriteString(w, "second")
	}))
	defer srv.Close()
	p := port(t, srv)
	h := newHarness(t, policy(t, `{"allow": ["example.com:`+p+`"]}`), Options{})
	resp, err := h.client(nil).Get("http://example.com:" + p + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, len("first;"))
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "first;" {
		t.Fatalf("first part %q %v", first, err)
	}
	close(next)
	if rest, _ := io.ReadAll(resp.Body); string(rest) != "second" {
		t.Fatalf("rest %q", rest)
	}

	c, err := net.Dial("tcp", h.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST http://example.com:%s/ HTTP/1.1\r\nHost: example.com\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n", p)
	br := bufio.NewReader(c)
	if line, _ := br.ReadString('\n'); line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("before the body: %q", line)
	}
	br.ReadString('\n')
	io.WriteString(c, "body")
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != `got body, expect ""` {
		t.Fatalf("POST: %q", b)
	}
}

// TestHostHeaderIgnored: the server sees the authority the proxy checked,
// not a Host header that names another site.
func TestHostHeaderIgnored(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Host) }))
	defer srv.Close()
	p := port(t, srv)
	h := newHarness(t, policy(t, `{"allow": ["example.com:`+p+`"]}`), Options{})
	c, err := net.Dial("tcp", h.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://example.com:%s/ HTTP/1.1\r\nHost: fronted.test\r\nConnection: close\r\n\r\n", p)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "example.com:"+p {
		t.Fatalf("the server saw Host %q", b)
	}
}
