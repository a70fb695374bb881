package egress

import (
	"net"
	"net/netip"
	"testing"
)

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
