package egress

import (
	"net"
	"net/netip"
	"testing"
)

func TestAddrGuard(t *testing.T) {
	g := &addrGuard{
		open: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.1.0.0/16")},
		interfaces: func() ([]net.Addr, error) {
			return []net.Addr{&net.IPNet{IP: net.ParseIP("203.0.113.7"), Mask: net.CIDRMask(24, 32)}}, nil
		},
	}
	cases := []struct {
		addr string
		port int
		want string
	}{
		{"93.184.216.34", 443, ""},
		{"2606:2800:220:1::1", 443, ""},
		{"127.0.0.1", 8080, ""}, // opened
		{"10.1.2.3", 443, ""},   // opened
		{"127.0.0.1", 25, "port 25 (mail) is never opened"},
		{"93.184.216.34", 25, "port 25 (mail) is never opened"},
		{"127.0.0.2", 80, "loopback address 127.0.0.2"},
		{"10.2.0.1", 80, "private address 10.2.0.1"},
		{"172.16.0.1", 80, "private address 172.16.0.1"},
		{"172.31.255.255", 80, "private address 172.31.255.255"},
		{"172.32.0.1", 80, ""},
		{"192.168.1.1", 80, "private address 192.168.1.1"},
		{"169.254.169.254", 80, "cloud metadata address 169.254.169.254"},
		{"169.254.1.1", 80, "link-local address 169.254.1.1"},
		{"100.64.0.1", 80, "shared (carrier-grade NAT) address 100.64.0.1"},
		{"0.0.0.0", 80, "unspecified address 0.0.0.0"},
		{"224.0.0.1", 80, "multicast address 224.0.0.1"},
		{"255.255.255.255", 80, "reserved address 255.255.255.255"},
		{"240.0.0.1", 80, "reserved address 240.0.0.1"},
		{"203.0.113.7", 80, "the host's own address 203.0.113.7"},
		{"::1", 80, "reserved address ::1"},
		{"::", 80, "reserved address ::"},
		{"fd00::1", 80, "private (unique local) address fd00::1"},
		{"fe80::1", 80, "link-local address fe80::1"},
		{"ff02::1", 80, "multicast address ff02::1"},
		{"::ffff:127.0.0.2", 80, "loopback address 127.0.0.2"},
		{"::ffff:169.254.169.254", 80, "cloud metadata address 169.254.169.254"},
		{"::ffff:127.0.0.1", 80, ""}, // the opened address, mapped
		{"64:ff9b::a9fe:a9fe", 80, "link-local address 64:ff9b::a9fe:a9fe"},
		{"64:ff9b::7f00:1", 80, "loopback address 64:ff9b::7f00:1"},
		{"2002:7f00:1::1", 80, "loopback address 2002:7f00:1::1"},
		{"2002:c0a8:101::1", 80, "private address 2002:c0a8:101::1"},
		{"2002:5db8:d822::1", 80, ""}, // 6to4 of a public address
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", 80, "tunnelled address 2001:0:4136:e378:8000:63bf:3fff:fdd2"},
	}
	for _, tc := range cases {
		if got := g.refused(netip.MustParseAddr(tc.addr), tc.port); got != tc.want {
			t.Errorf("refused(%s, %d) = %q, want %q", tc.addr, tc.port, got, tc.want)
		}
	}
}

func TestNormHost(t *testing.T) {
	for in, want := range map[string]string{
		"Example.COM.": "example.com", "[::1]": "::1", "::FFFF:127.0.0.1": "::ffff:127.0.0.1", "fe80::1%eth0": "fe80::1",
	} {
		if got := normHost(in); got != want {
			t.Errorf("normHost(%q) = %q, want %q", in, got, want)
		}
	}
	for h, want := range map[string]bool{"example.com": true, "a_b.example": true, "": false, "a b": false, "a/b": false, ".x": false, "a..b": false, "::1": true} {
		if validHost(h) != want {
			t.Errorf("validHost(%q) != %v", h, want)
		}
	}
}

// TestOwnAddressInEveryForm: the host's own address is refused in the
// forms that reach it through a translator too (NAT64, 6to4), not only
// as itself and v4-mapped.
func TestOwnAddressInEveryForm(t *testing.T) {
	g := &addrGuard{interfaces: func() ([]net.Addr, error) {
		return []net.Addr{&net.IPNet{IP: net.ParseIP("203.0.113.7"), Mask: net.CIDRMask(24, 32)}}, nil
	}}
	for _, s := range []string{"203.0.113.7", "::ffff:203.0.113.7", "64:ff9b::cb00:7107", "2002:cb00:7107::1"} {
		if why := g.refused(netip.MustParseAddr(s), 443); why != "the host's own address 203.0.113.7" {
			t.Errorf("%s: %q, want refused as the host's own address", s, why)
		}
	}
	if why := g.refused(netip.MustParseAddr("64:ff9b::cb00:7108"), 443); why != "" {
		t.Errorf("another public address refused: %q", why)
	}
}
