package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/proxy"

	"github.com/agentbox/agentbox/internal/event"
)

// harness is a job's proxy served on a loopback listener, as the channel
// to a sandbox would hand it streams, with the events it records.
type harness struct {
	t   *testing.T
	p   *Proxy
	ln  net.Listener
	url *url.URL
	wg  sync.WaitGroup

	mu     sync.Mutex
	events []event.Network
	signal chan struct{}
}

// noDNS resolves nothing: a test never asks the host's resolver (whose
// server need not be on the loopback).
var noDNS = &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("no DNS in tests")
}}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

func pins(names ...string) map[string][]netip.Addr {
	m := map[string][]netip.Addr{}
	for _, n := range names {
		m[n] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	}
	return m
}

// policy reads a policy's JSON and checks it as the API would.
func policy(t *testing.T, js string) Policy { t.Helper(); return policyIn(t, &Config{}, js) }

// policyIn reads a policy's JSON and checks it against cfg.
func policyIn(t *testing.T, cfg *Config, js string) Policy {
	t.Helper()
	var p Policy
	if err := json.Unmarshal([]byte(js), &p); err != nil {
		t.Fatalf("policy %s: %v", js, err)
	}
	p, err := cfg.Check(p)
	if err != nil {
		t.Fatalf("check %s: %v", js, err)
	}
	return p
}

func newHarness(t *testing.T, pol Policy, o Options) *harness {
	t.Helper()
	h := &harness{t: t, signal: make(chan struct{}, 1)}
	if o.Config == nil {
		o.Config = &Config{}
	}
	if o.AllowPrivate == nil {
		o.AllowPrivate = loopback
	}
	if o.Resolve == nil {
		o.Resolve = pins("example.com", "allowed.test", "a.example.test", "example.test", "bad.test", "late.test")
	}
	if o.Resolver == nil {
		o.Resolver = noDNS
	}
	o.Record = func(ev event.Network) {
		h.mu.Lock()
		h.events = append(h.events, ev)
		h.mu.Unlock()
		select {
		case h.signal <- struct{}{}:
		default:
		}
	}
	p, err := New("job-1", pol, o)
	if err != nil {
		t.Fatal(err)
	}
	h.p = p
	h.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.url = &url.URL{Scheme: "http", Host: h.ln.Addr().String()}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			c, err := h.ln.Accept()
			if err != nil {
				return
			}
			h.wg.Add(1)
			go func() { defer h.wg.Done(); p.Serve(c) }()
		}
	}()
	t.Cleanup(h.close)
	return h
}

// close stops the proxy and waits for every Serve.
func (h *harness) close() {
	h.ln.Close()
	h.p.Close()
	h.wg.Wait()
}

// client is an HTTP client using the proxy for http and https, trusting
// the test servers' certificate.
func (h *harness) client(srv *httptest.Server) *http.Client {
	tr := &http.Transport{Proxy: http.ProxyURL(h.url), DisableKeepAlives: true}
	if srv != nil && srv.TLS != nil {
		tr.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// wait returns the events once there are n, failing after a while.
func (h *harness) wait(n int) []event.Network {
	h.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		h.mu.Lock()
		evs := append([]event.Network(nil), h.events...)
		h.mu.Unlock()
		if len(evs) >= n {
			return evs
		}
		select {
		case <-h.signal:
		case <-deadline:
			h.t.Fatalf("%d events, want %d: %+v", len(evs), n, evs)
		}
	}
}

// exactly closes the proxy and checks it recorded exactly n events.
func (h *harness) exactly(n int) []event.Network {
	h.t.Helper()
	h.wait(n) // the last connections end on their own, not by Close
	h.close()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) != n {
		h.t.Fatalf("%d events, want exactly %d: %+v", len(h.events), n, h.events)
	}
	return h.events
}

func port(t *testing.T, srv *httptest.Server) string {
	u, _ := url.Parse(srv.URL)
	return u.Port()
}

func hello(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Proxy-Authorization") != "" || r.Header.Get("Proxy-Connection") != "" {
		http.Error(w, "proxy header leaked", 500)
		return
	}
	io.WriteString(w, "hello "+r.Method)
}

func get(t *testing.T, c *http.Client, method, u string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	if tr, ok := c.Transport.(*http.Transport); ok && tr.Proxy != nil && strings.HasPrefix(u, "http://") {
		req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0") // the proxy must drop it
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error(), nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, "read: " + err.Error(), resp.Header
	}
	return resp.StatusCode, string(b), resp.Header
}

func TestAllowedHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(hello))
	defer srv.Close()
	h := newHarness(t, policy(t, `{"allow": ["example.com:`+port(t, srv)+`"]}`), Options{})
	status, body, _ := get(t, h.client(nil), "GET", "http://example.com:"+port(t, srv)+"/a/b?token=x")
	if status != 200 || body != "hello GET" {
		t.Fatalf("got %d %q", status, body)
	}
	ev := h.exactly(1)[0]
	want := event.Network{Protocol: "http", Host: "example.com", Port: ev.Port, Addr: "127.0.0.1", Decision: "allow",
		Rule: "example.com:" + port(t, srv), Reason: "allowed by example.com:" + port(t, srv), Method: "GET", Path: "/a/b"}
	got := ev
	got.BytesIn, got.BytesOut, got.DurationMS = 0, 0, 0
	if got != want {
		t.Fatalf("event %+v\nwant %+v", got, want)
	}
	if ev.BytesIn == 0 || ev.BytesOut == 0 {
		t.Fatalf("no bytes counted: %+v", ev)
	}
	if in, out := h.p.Bytes(); in != ev.BytesIn || out != ev.BytesOut {
		t.Fatalf("Bytes() %d %d, event %d %d", in, out, ev.BytesIn, ev.BytesOut)
	}
}

func TestKeepAliveEachRequestChecked(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(hello))
	defer srv.Close()
	p := port(t, srv)
	h := newHarness(t, policy(t, `{"allow": [{"host": "example.com:`+p+`", "methods": ["GET"]}]}`), Options{})
	c := h.client(nil)
	c.Transport.(*http.Transport).DisableKeepAlives = false
	for i := range 3 {
		if status, body, _ := get(t, c, "GET", "http://example.com:"+p+"/"+strconv.Itoa(i)); status != 200 {
			t.Fatalf("GET %d: %d %q", i, status, body)
		}
	}
	status, body, hdr := get(t, c, "POST", "http://example.com:"+p+"/post")
	if status != 403 || !strings.Contains(body, "refused example.com:"+p+": example.com:"+p+" allows only GET") || hdr.Get("X-Agentbox-Egress") != "denied" {
		t.Fatalf("POST: %d %q %v", status, body, hdr)
	}
	evs := h.exactly(4)
	for i, ev := range evs[:3] {
		if ev.Decision != "allow" || ev.Path != "/"+strconv.Itoa(i) {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
	if d := evs[3]; d.Decision != "deny" || d.Method != "POST" || d.Rule != "example.com:"+p {
		t.Fatalf("deny event %+v", d)
	}
	if ds := h.p.Denials(time.Time{}); len(ds) != 1 || ds[0].Method != "POST" {
		t.Fatalf("denials %+v", ds)
	}
}

func TestAllowedCONNECT(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(hello))
	defer srv.Close()
	p := port(t, srv)
	h := newHarness(t, policy(t, `{"allow": ["example.com:`+p+`"]}`), Options{})
	status, body, _ := get(t, h.client(srv), "GET", "https://example.com:"+p+"/")
	if status != 200 || body != "hello GET" {
		t.Fatalf("got %d %q", status, body)
	}
	ev := h.exactly(1)[0]
	if ev.Protocol != "connect" || ev.Decision != "allow" || ev.Addr != "127.0.0.1" || ev.Error != "" || ev.BytesIn < 500 || ev.BytesOut < 100 || ev.Method != "" {
		t.Fatalf("event %+v", ev)
	}
}

func TestAllowedSOCKS5(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(hello))
	defer srv.Close()
	p := port(t, srv)
	h := newHarness(t, policy(t, `{"allow": ["example.com:`+p+`"]}`), Options{})
	d, err := proxy.SOCKS5("tcp", h.ln.Addr().String(), nil, proxy.Direct)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: d.(proxy.ContextDialer).DialContext}}
	status, body, _ := get(t, c, "GET", "http://example.com:"+p+"/")
	if status != 200 || body != "hello GET" {
		t.Fatalf("got %d %q", status, body)
	}
	_, err = d.Dial("tcp", "nothere.test:"+p)
	if err == nil || !strings.Contains(err.Error(), "not allowed by ruleset") {
		t.Fatalf("denied name: %v", err)
	}
	evs := h.exactly(2)
	if evs[0].Decision == "deny" { // the allowed one ends when its connection does
		evs[0], evs[1] = evs[1], evs[0]
	}
	if evs[0].Protocol != "socks5" || evs[0].Decision != "allow" || evs[0].Host != "example.com" || evs[0].BytesIn == 0 {
		t.Fatalf("event %+v", evs[0])
	}
	if evs[1].Decision != "deny" || evs[1].Host != "nothere.test" || !strings.Contains(evs[1].Reason, "not in the job's allow list") {
		t.Fatalf("deny event %+v", evs[1])
	}
}

func TestOriginFormIs400(t *testing.T) {
	h := newHarness(t, policy(t, `{"mode": "open"}`), Options{})
	c, err := net.Dial("tcp", h.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 400 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ev := h.exactly(1)[0]; ev.Decision != "deny" || !strings.Contains(ev.Reason, "absolute http://") {
		t.Fatalf("event %+v", ev)
	}
}

func TestHeaderCap(t *testing.T) {
	h := newHarness(t, policy(t, `{"mode": "open"}`), Options{})
	c, err := net.Dial("tcp", h.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		io.WriteString(c, "GET http://example.com/ HTTP/1.1\r\nX: ")
		c.Write([]byte(strings.Repeat("a", 1<<20))) // fails once the proxy closes
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 431 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	h.exactly(1)
}

func TestBytesBound(t *testing.T) {
	big := strings.Repeat("x", 8<<20)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, big) }))
	defer srv.Close()
	p := port(t, srv)
	const bound = 1 << 20
	h := newHarness(t, policy(t, `{"allow": ["example.com:`+p+`"]}`), Options{Bytes: bound})
	status, body, _ := get(t, h.client(srv), "GET", "https://example.com:"+p+"/")
	if status == 200 && !strings.HasPrefix(body, "read: ") || status != 200 && status != 0 {
		t.Fatalf("the download was not cut: %d, %d bytes", status, len(body))
	}
	evs := h.wait(1)
	// Past the bound by at most what the other direction moved while a
	// read was under way (the TLS handshake's bytes, here).
	if ev := evs[0]; ev.Decision != "allow" || ev.Error != "egress bytes bound (1048576) reached" || ev.BytesIn+ev.BytesOut < bound || ev.BytesIn+ev.BytesOut > bound+16<<10 {
		t.Fatalf("event %+v", ev)
	}
	if in, out := h.p.Bytes(); in+out < bound || in+out > bound+16<<10 {
		t.Fatalf("bytes %d+%d, bound %d", in, out, bound)
	}
	status, body, _ = get(t, h.client(nil), "GET", "http://example.com:"+p+"/")
	if status != 403 || !strings.Contains(body, "egress bytes bound (1048576) reached") {
		t.Fatalf("after the bound: %d %q", status, body)
	}
	h.exactly(2)
}

func TestConnsBound(t *testing.T) {
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free() // before srv.Close, which waits for the handlers
	var inside atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside.Add(1)
		<-release
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	p := port(t, srv)
	base := runtime.NumGoroutine()
	h := newHarness(t, policy(t, `{"allow": ["example.com:`+p+`"]}`), Options{Conns: 64})
	c := h.client(nil)
	const n = 200
	statuses := make(chan int, n)
	start := time.Now()
	for range n {
		go func() {
			status, _, _ := get(t, c, "GET", "http://example.com:"+p+"/")
			statuses <- status
		}()
	}
	got := map[int]int{}
	for range n - 64 {
		got[<-statuses]++
	}
	if got[429] != n-64 {
		t.Fatalf("before release: %v", got)
	}
	await(t, "64 requests at the server", func() bool { return inside.Load() == 64 })
	free()
	for range 64 {
		got[<-statuses]++
	}
	if got[200] != 64 || time.Since(start) > 10*time.Second {
		t.Fatalf("statuses %v after %s", got, time.Since(start))
	}
	evs := h.exactly(n)
	denied := 0
	for _, ev := range evs {
		if ev.Decision == "deny" {
			denied++
			if ev.Reason != "more than 64 connections at once" || ev.Host != "example.com" || ev.Method != "GET" {
				t.Fatalf("event %+v", ev)
			}
		}
	}
	if denied != n-64 {
		t.Fatalf("%d denied events", denied)
	}
	c.CloseIdleConnections()
	srv.Close()
	await(t, "goroutines back to their number before", func() bool { return runtime.NumGoroutine() <= base+2 })
}

// await polls cond until it holds, failing after 10 s.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("no %s after 10 s; goroutines:\n%s", what, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestIdleTimeout(t *testing.T) {
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
			defer c.Close() // says nothing, reads nothing
		}
	}()
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	h := newHarness(t, policy(t, `{"allow": ["example.com:`+p+`"]}`), Options{Idle: 200 * time.Millisecond})
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
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("read: %v, want EOF from the idle proxy", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("closed after %s", d)
	}
	if ev := h.wait(1)[0]; ev.Decision != "allow" || ev.Error != "idle for 200ms" {
		t.Fatalf("event %+v", ev)
	}
}

func TestSetPolicyNextConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(hello))
	defer srv.Close()
	p := port(t, srv)
	h := newHarness(t, policy(t, `{"allow": ["example.com:`+p+`"]}`), Options{})
	c := h.client(nil)
	if status, _, _ := get(t, c, "GET", "http://late.test:"+p+"/"); status != 403 {
		t.Fatalf("before: %d", status)
	}
	pol := policy(t, `{"allow": ["example.com:`+p+`", "late.test:`+p+`"]}`)
	h.p.SetPolicy(pol)
	if got := h.p.Policy(); len(got.Allow) != 2 {
		t.Fatalf("Policy() %+v", got)
	}
	if status, body, _ := get(t, c, "GET", "http://late.test:"+p+"/"); status != 200 {
		t.Fatalf("after: %d %q", status, body)
	}
	evs := h.exactly(2)
	if evs[0].Decision != "deny" || evs[1].Decision != "allow" {
		t.Fatalf("events %+v", evs)
	}
}

func TestServeAfterClose(t *testing.T) {
	h := newHarness(t, policy(t, `{"mode": "open"}`), Options{})
	h.p.Close()
	a, b := net.Pipe()
	done := make(chan struct{})
	go func() { h.p.Serve(a); close(done) }()
	io.WriteString(b, "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(b), nil)
	if err != nil || resp.StatusCode != 429 {
		t.Fatalf("%v %v", resp, err)
	}
	<-done
	if ev := h.wait(1)[0]; ev.Decision != "deny" || ev.Reason != errClosed.Error() {
		t.Fatalf("event %+v", ev)
	}
}

func TestSandboxEnv(t *testing.T) {
	env := SandboxEnv("http://127.0.0.1:3128", "/etc/agentbox/ca.pem")
	for k, v := range map[string]string{
		"HTTP_PROXY": "http://127.0.0.1:3128", "https_proxy": "http://127.0.0.1:3128",
		"ALL_PROXY": "socks5h://127.0.0.1:3128", "all_proxy": "socks5h://127.0.0.1:3128",
		"NO_PROXY": "localhost,127.0.0.1", "no_proxy": "localhost,127.0.0.1",
		"SSL_CERT_FILE": "/etc/agentbox/ca.pem", "CURL_CA_BUNDLE": "/etc/agentbox/ca.pem", "PIP_CERT": "/etc/agentbox/ca.pem",
	} {
		if env[k] != v {
			t.Errorf("%s=%q, want %q", k, env[k], v)
		}
	}
	if _, ok := SandboxEnv("http://127.0.0.1:3128", "")["SSL_CERT_FILE"]; ok {
		t.Error("a CA variable without a bundle")
	}
}

// TestHugeHostEventBounded: a host name of tens of kilobytes (the header
// block allows 64 KiB) is refused, and its event does not carry it whole:
// a flood of them would fill the job's log.
func TestHugeHostEventBounded(t *testing.T) {
	h := newHarness(t, policy(t, `{"mode": "open"}`), Options{})
	huge := strings.Repeat("a", 40000) + ".test"
	for _, req := range []string{
		"CONNECT " + huge + ":443 HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET http://" + huge + "/ HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		c, err := net.Dial("tcp", h.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 403 {
			t.Fatalf("%.20s…: %v %v", req, resp, err)
		}
		c.Close()
	}
	for _, ev := range h.exactly(2) {
		if ev.Decision != "deny" || len(ev.Host) > 255 || len(ev.Reason) > 300 {
			t.Errorf("event with a %d-byte host, %d-byte reason", len(ev.Host), len(ev.Reason))
		}
	}
}

// TestHugeServerNameEventBounded: a terminated host's TLS server name of
// tens of kilobytes fails the handshake, and the event's error does not
// carry it whole.
func TestHugeServerNameEventBounded(t *testing.T) {
	b, err := NewBroker("job-1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
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
			defer c.Close()
		}
	}()
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	h := newHarness(t, policy(t, `{"allow": [{"host": "example.com:`+p+`", "methods": ["GET"]}]}`), Options{Terminator: b})
	c, err := net.Dial("tcp", h.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT example.com:"+p+" HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	tc := tls.Client(c, &tls.Config{ServerName: strings.Repeat("a", 30000) + ".test", InsecureSkipVerify: true})
	if err := tc.Handshake(); err == nil {
		t.Fatal("handshake with a foreign server name succeeded")
	}
	if ev := h.wait(1)[0]; len(ev.Error) > 1000 || len(ev.Reason) > 1000 {
		t.Errorf("event with a %d-byte error, %d-byte reason", len(ev.Error), len(ev.Reason))
	}
}
