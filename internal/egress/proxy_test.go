package egress

import (
	"bufio"
	"context"
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

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

func pins(names ...string) map[string][]netip.Addr {
	m := map[string][]netip.Addr{}
	for _, n := range names {
		m[n] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	}
	return m
}

// policy reads a policy's JSON and checks it as the API would.
func policy(t *testing.T, js string) Policy {
	t.Helper()
	var p Policy
	if err := json.Unmarshal([]byte(js), &p); err != nil {
		t.Fatalf("policy %s: %v", js, err)
	}
	p, err := (&Config{}).Check(p)
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

// TestRefused is what the proxy refuses: by the policy, and whatever the
// policy says.
func TestRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(hello))
	defer srv.Close()
	p := port(t, srv)
	// A listener on 127.0.0.2 at the same port: nothing may reach it.
	other, err := net.Listen("tcp", "127.0.0.2:"+p)
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2:%s: %v", p, err)
	}
	var reached atomic.Int32
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			reached.Add(1)
			c.Close()
		}
	}()
	defer other.Close()
	res := map[string][]netip.Addr{
		"example.com":      {netip.MustParseAddr("127.0.0.1")},
		"a.example.test":   {netip.MustParseAddr("127.0.0.1")},
		"example.test":     {netip.MustParseAddr("127.0.0.1")},
		"bad.example.test": {netip.MustParseAddr("127.0.0.1")},
		"two.test":         {netip.MustParseAddr("127.0.0.2")},
		"mixed.test":       {netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.1")},
		"meta.test":        {netip.MustParseAddr("169.254.169.254")},
		"mapped.test":      {netip.MustParseAddr("::ffff:127.0.0.2")},
	}
	cases := []struct {
		name, policy, url string
		status            int
		reason, rule      string
	}{
		{"not allowed", `{"allow": ["example.com:` + p + `"]}`, "http://nothere.test:" + p + "/", 403, "nothere.test:" + p + " is not in the job's allow list", ""},
		{"mode none", `{}`, "http://example.com:" + p + "/", 403, "the job's network mode is none", ""},
		{"deny beats allow", `{"allow": ["*.example.test:` + p + `"], "deny": ["bad.example.test:` + p + `"]}`, "http://bad.example.test:" + p + "/", 403, "denied by bad.example.test:" + p, "bad.example.test:" + p},
		{"wildcard allows beneath", `{"allow": ["*.example.test:` + p + `"]}`, "http://a.example.test:" + p + "/", 200, "allowed by *.example.test:" + p, "*.example.test:" + p},
		{"wildcard not the name", `{"allow": ["*.example.test:` + p + `"]}`, "http://example.test:" + p + "/", 403, "example.test:" + p + " is not in the job's allow list", ""},
		{"default ports only", `{"allow": ["example.com"]}`, "http://example.com:" + p + "/", 403, "example.com:" + p + " is not in the job's allow list", ""},
		{"open refuses 127.0.0.2", `{"mode": "open"}`, "http://127.0.0.2:" + p + "/", 403, "loopback address 127.0.0.2", ""},
		{"open allows what the operator opened", `{"mode": "open"}`, "http://127.0.0.1:" + p + "/", 200, "mode open", ""},
		{"name pinned to 127.0.0.2", `{"allow": ["two.test:` + p + `"]}`, "http://two.test:" + p + "/", 403, "loopback address 127.0.0.2", ""},
		{"refused answer skipped", `{"allow": ["mixed.test:` + p + `"]}`, "http://mixed.test:" + p + "/", 200, "allowed by mixed.test:" + p, "mixed.test:" + p},
		{"v4-mapped", `{"allow": ["mapped.test:` + p + `"]}`, "http://mapped.test:" + p + "/", 403, "loopback address 127.0.0.2", ""},
		{"ipv6 loopback", `{"mode": "open"}`, "http://[::1]:" + p + "/", 403, "reserved address ::1", ""},
		{"metadata", `{"mode": "open"}`, "http://169.254.169.254/latest/meta-data/", 403, "cloud metadata address 169.254.169.254", ""},
		{"metadata by name", `{"allow": ["meta.test"]}`, "http://meta.test/", 403, "cloud metadata address 169.254.169.254", ""},
		{"port 25", `{"allow": ["example.com:25"]}`, "http://example.com:25/", 403, "port 25 (mail) is never opened", ""},
		{"cidr allows by address", `{"allow": ["127.0.0.0/8:` + p + `"]}`, "http://example.com:" + p + "/", 200, "allowed by 127.0.0.0/8:" + p, "127.0.0.0/8:" + p},
		{"cidr denies by address", `{"allow": ["example.com:` + p + `"], "deny": ["127.0.0.1/32:` + p + `"]}`, "http://example.com:" + p + "/", 403, "denied by 127.0.0.1/32:" + p, "127.0.0.1/32:" + p},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, policy(t, tc.policy), Options{Resolve: res})
			status, body, hdr := get(t, h.client(nil), "GET", tc.url)
			if status != tc.status {
				t.Fatalf("status %d %q, want %d", status, body, tc.status)
			}
			if status == 403 && (!strings.Contains(body, tc.reason) || hdr.Get("X-Agentbox-Egress") != "denied" || !strings.HasPrefix(body, "agentbox egress proxy: refused ")) {
				t.Fatalf("body %q, headers %v: want reason %q", body, hdr, tc.reason)
			}
			ev := h.exactly(1)[0]
			want := map[int]string{200: "allow", 403: "deny"}[tc.status]
			if ev.Decision != want || ev.Reason != tc.reason || ev.Rule != tc.rule {
				t.Fatalf("event %+v, want %s %q rule %q", ev, want, tc.reason, tc.rule)
			}
		})
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("127.0.0.2 reached %d times", n)
	}
}

// TestRefusedCONNECT: the refusals through CONNECT, where the client sees
// only the status.
func TestRefusedCONNECT(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(hello))
	defer srv.Close()
	p := port(t, srv)
	cases := []struct{ name, policy, url, reason string }{
		{"ipv6 loopback literal", `{"mode": "open"}`, "https://[::1]:" + p + "/", "reserved address ::1"},
		{"not allowed", `{"allow": ["example.com:` + p + `"]}`, "https://late.test:" + p + "/", "late.test:" + p + " is not in the job's allow list"},
		{"terminated without a terminator", `{"allow": [{"host": "example.com:` + p + `", "methods": ["GET"]}]}`, "https://example.com:" + p + "/", "needs TLS termination, which this proxy lacks"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, policy(t, tc.policy), Options{})
			status, body, _ := get(t, h.client(srv), "GET", tc.url)
			if status != 0 || !strings.Contains(body, "Forbidden") {
				t.Fatalf("got %d %q, want a refused CONNECT", status, body)
			}
			ev := h.exactly(1)[0]
			if ev.Protocol != "connect" || ev.Decision != "deny" || ev.Reason != tc.reason {
				t.Fatalf("event %+v, want reason %q", ev, tc.reason)
			}
		})
	}
}

func TestSNIMismatch(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(hello))
	defer srv.Close()
	p := port(t, srv)
	h := newHarness(t, policy(t, `{"allow": ["example.com:`+p+`"]}`), Options{})
	c := h.client(srv)
	c.Transport.(*http.Transport).TLSClientConfig.ServerName = "Elsewhere.Test."
	status, body, _ := get(t, c, "GET", "https://example.com:"+p+"/")
	if status != 0 {
		t.Fatalf("got %d %q, want the tunnel closed", status, body)
	}
	// The same name, other case and a trailing dot: allowed.
	c.Transport.(*http.Transport).TLSClientConfig.ServerName = "EXAMPLE.com."
	c.Transport.(*http.Transport).TLSClientConfig.InsecureSkipVerify = true
	if status, body, _ := get(t, c, "GET", "https://example.com:"+p+"/"); status != 200 {
		t.Fatalf("same name: %d %q", status, body)
	}
	evs := h.exactly(2)
	if ev := evs[0]; ev.Decision != "deny" || ev.Reason != "TLS server name elsewhere.test differs from the host asked for example.com" || ev.Addr != "127.0.0.1" {
		t.Fatalf("event %+v", ev)
	}
	if evs[1].Decision != "allow" {
		t.Fatalf("event %+v", evs[1])
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

// dnsFlip answers the first A question for flip.test with 127.0.0.1 and
// every later one with 127.0.0.2.
func dnsFlip(t *testing.T) *net.Resolver {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	var asked atomic.Int32
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if reply := flipReply(buf[:n], &asked); reply != nil {
				pc.WriteTo(reply, from)
			}
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

func TestResolverFlipNeverReachesSecondAddress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(hello))
	defer srv.Close()
	p := port(t, srv)
	other, err := net.Listen("tcp", "127.0.0.2:"+p)
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2:%s: %v", p, err)
	}
	defer other.Close()
	var reached atomic.Int32
	go func() {
		for {
			c, err := other.Accept()
			if err != nil {
				return
			}
			reached.Add(1)
			c.Close()
		}
	}()
	h := newHarness(t, policy(t, `{"allow": ["flip.test:`+p+`"]}`), Options{Resolver: dnsFlip(t)})
	c := h.client(nil)
	if status, body, _ := get(t, c, "GET", "http://flip.test:"+p+"/"); status != 200 {
		t.Fatalf("first: %d %q", status, body)
	}
	for range 3 {
		status, body, _ := get(t, c, "GET", "http://flip.test:"+p+"/")
		if status != 403 || !strings.Contains(body, "loopback address 127.0.0.2") {
			t.Fatalf("after the flip: %d %q", status, body)
		}
	}
	evs := h.exactly(4)
	if evs[0].Addr != "127.0.0.1" || evs[1].Addr != "127.0.0.2" {
		t.Fatalf("events %+v", evs)
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("127.0.0.2 reached %d times", n)
	}
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
	if ev := evs[0]; ev.Decision != "allow" || ev.Error != "egress bytes bound (1048576) reached" || ev.BytesIn+ev.BytesOut != bound {
		t.Fatalf("event %+v", ev)
	}
	if in, out := h.p.Bytes(); in+out != bound {
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

// TestEventHostCapped: the host of an event is the name the sandbox
// asked for, up to the 64 KiB of a request's head; every reader of the
// log (the job's network summary, the UI's Network section and timeline,
// SSE) holds or shows it, so it is recorded cut to a DNS name's length.
func TestEventHostCapped(t *testing.T) {
	for _, head := range []string{
		"CONNECT " + strings.Repeat("a", 60000) + ":443 HTTP/1.1\r\n\r\n",
		"GET http://" + strings.Repeat("b", 60000) + "/ HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		h := newHarness(t, policy(t, `{"mode": "open"}`), Options{})
		c, err := net.Dial("tcp", h.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, head)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%.20s: %v %v, want a 403", head, resp, err)
		}
		c.Close()
		ev := h.exactly(1)[0]
		if len(ev.Host) > maxHost || !strings.HasPrefix(ev.Host, head[8:18]) && !strings.HasPrefix(ev.Host, head[11:21]) {
			t.Errorf("%.20s: event host of %d bytes (%.20q), want at most %d", head, len(ev.Host), ev.Host, maxHost)
		}
	}
}

// TestNeverServer: agentbox's own server is never reached, whatever
// AGENTBOX_EGRESS_ALLOW_PRIVATE opens: an operator who opens loopback for
// a local package mirror (as this package's tests do) would otherwise
// give a job in mode open the API of a server without auth (which only
// listens on loopback), and with it every job's policy, its own first.
// An unspecified listen address stands for every loopback address at its
// port.
func TestNeverServer(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(hello))
	defer api.Close()
	mirror := httptest.NewServer(http.HandlerFunc(hello))
	defer mirror.Close()
	for _, listen := range []string{api.Listener.Addr().String(), "0.0.0.0:" + port(t, api), "[::]:" + port(t, api)} {
		h := newHarness(t, policy(t, `{"mode": "open"}`), Options{Never: []netip.AddrPort{netip.MustParseAddrPort(listen)}})
		if status, body, _ := get(t, h.client(nil), "GET", "http://example.com:"+port(t, mirror)+"/"); status != 200 || body != "hello GET" {
			t.Fatalf("listening on %s, the mirror: %d %q", listen, status, body)
		}
		for _, u := range []string{"http://example.com:" + port(t, api) + "/", "http://127.0.0.1:" + port(t, api) + "/"} {
			if status, body, _ := get(t, h.client(nil), "GET", u); status != 403 || !strings.Contains(body, "agentbox's own server") {
				t.Errorf("listening on %s, %s: %d %q, want a 403", listen, u, status, body)
			}
		}
		denied := 0
		for _, ev := range h.exactly(3) {
			if ev.Decision == "deny" && strings.HasPrefix(ev.Reason, "agentbox's own server") {
				denied++
			}
		}
		if denied != 2 {
			t.Errorf("listening on %s: %d denials of the server, want 2", listen, denied)
		}
	}
}
