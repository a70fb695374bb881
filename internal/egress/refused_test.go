package egress

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

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
	if evs[0].Decision == "allow" {
		evs[0], evs[1] = evs[1], evs[0]
	}
	if ev := evs[0]; ev.Decision != "deny" || ev.Reason != "TLS server name elsewhere.test differs from the host asked for example.com" || ev.Addr != "127.0.0.1" {
		t.Fatalf("event %+v", ev)
	}
	if evs[1].Decision != "allow" {
		t.Fatalf("event %+v", evs[1])
	}
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
	by := map[string]int{}
	for _, ev := range h.exactly(4) {
		by[ev.Decision+" "+ev.Addr]++
	}
	if by["allow 127.0.0.1"] != 1 || by["deny 127.0.0.2"] != 3 {
		t.Fatalf("events %v", by)
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("127.0.0.2 reached %d times", n)
	}
}
