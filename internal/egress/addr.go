package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// refusedV4 and refusedV6 are the ranges the proxy refuses whatever a
// job's policy says, unless the operator opens one (Options.AllowPrivate).
var (
	refusedV4 = []struct {
		p    netip.Prefix
		what string
	}{
		{netip.MustParsePrefix("0.0.0.0/8"), "unspecified address"},
		{netip.MustParsePrefix("10.0.0.0/8"), "private address"},
		{netip.MustParsePrefix("100.64.0.0/10"), "shared (carrier-grade NAT) address"},
		{netip.MustParsePrefix("127.0.0.0/8"), "loopback address"},
		{netip.MustParsePrefix("169.254.0.0/16"), "link-local address"},
		{netip.MustParsePrefix("172.16.0.0/12"), "private address"},
		{netip.MustParsePrefix("192.0.0.0/24"), "reserved address"},
		{netip.MustParsePrefix("192.168.0.0/16"), "private address"},
		{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking address"},
		{netip.MustParsePrefix("224.0.0.0/4"), "multicast address"},
		{netip.MustParsePrefix("240.0.0.0/4"), "reserved address"}, // with broadcast
	}
	refusedV6 = []struct {
		p    netip.Prefix
		what string
	}{
		{netip.MustParsePrefix("::/96"), "reserved address"}, // ::, ::1, v4-compatible
		{netip.MustParsePrefix("100::/64"), "discard address"},
		{netip.MustParsePrefix("fc00::/7"), "private (unique local) address"},
		{netip.MustParsePrefix("fe80::/10"), "link-local address"},
		{netip.MustParsePrefix("fec0::/10"), "site-local address"},
		{netip.MustParsePrefix("ff00::/8"), "multicast address"},
	}
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	nat64Loc  = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour = netip.MustParsePrefix("2002::/16")
	teredo    = netip.MustParsePrefix("2001::/32")
)

const metadataAddr = "169.254.169.254"

// embeddedV4 is the IPv4 address a v6 address carries (v4-mapped, NAT64,
// 6to4), so the v4 ranges apply to it too.
func embeddedV4(a netip.Addr) (netip.Addr, bool) {
	if a.Is4() {
		return a, true
	}
	if a.Is4In6() {
		return a.Unmap(), true
	}
	b := a.As16()
	if nat64.Contains(a) {
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	}
	if sixToFour.Contains(a) {
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
}

// addrGuard says which addresses and ports the proxy refuses whatever the
// policy says.
type addrGuard struct {
	open  []netip.Prefix
	never []netip.AddrPort // Options.Never

	mu      sync.Mutex
	own     map[netip.Addr]bool
	ownTime time.Time
	// interfaces lists the host's own addresses; net.InterfaceAddrs but
	// for tests.
	interfaces func() ([]net.Addr, error)
}

// refused returns why a connection to a:port is refused, or "".
func (g *addrGuard) refused(a netip.Addr, port int) string {
	a = a.WithZone("")
	if port == 25 {
		return "port 25 (mail) is never opened"
	}
	if port < 1 || port > 65535 {
		return fmt.Sprintf("port %d is not 1-65535", port)
	}
	if g.isServer(a.Unmap(), port) {
		return "agentbox's own server " + netip.AddrPortFrom(a.Unmap(), uint16(port)).String()
	}
	for _, p := range g.open {
		if p.Contains(a) || (a.Is4In6() && p.Contains(a.Unmap())) {
			return ""
		}
	}
	if why := g.rangeOf(a); why != "" {
		return why + " " + a.Unmap().String()
	}
	if g.isOwn(a.Unmap()) {
		return "the host's own address " + a.Unmap().String()
	}
	// Through a NAT64 or 6to4 translator, the embedded address is the one reached.
	if v4, ok := embeddedV4(a); ok && g.isOwn(v4) {
		return "the host's own address " + v4.String()
	}
	return ""
}

// isServer says a:port is one of agentbox's own listeners (never).
func (g *addrGuard) isServer(a netip.Addr, port int) bool {
	for _, l := range g.never {
		if int(l.Port()) != port {
			continue
		}
		la := l.Addr().Unmap()
		switch {
		case la == a,
			la.IsLoopback() && (a.IsLoopback() || a.IsUnspecified()),
			la.IsUnspecified() && (a.IsLoopback() || a.IsUnspecified() || g.isOwn(a)):
			return true
		}
	}
	return false
}

func (g *addrGuard) rangeOf(a netip.Addr) string {
	if a.Unmap().String() == metadataAddr {
		return "cloud metadata address"
	}
	if v4, ok := embeddedV4(a); ok {
		for _, r := range refusedV4 {
			if r.p.Contains(v4) {
				return r.what
			}
		}
		if a.Is4() || a.Is4In6() {
			return ""
		}
	}
	if a.Is6() {
		if nat64Loc.Contains(a) || teredo.Contains(a) {
			return "tunnelled address"
		}
		for _, r := range refusedV6 {
			if r.p.Contains(a) {
				return r.what
			}
		}
	}
	return ""
}

// isOwn says a is one of the host's interface addresses, read at most
// once a minute.
func (g *addrGuard) isOwn(a netip.Addr) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.own == nil || time.Since(g.ownTime) > time.Minute {
		list := g.interfaces
		if list == nil {
			list = net.InterfaceAddrs
		}
		own := map[netip.Addr]bool{}
		if addrs, err := list(); err == nil {
			for _, x := range addrs {
				if p, err := netip.ParsePrefix(x.String()); err == nil {
					own[p.Addr().Unmap().WithZone("")] = true
				}
			}
		}
		g.own, g.ownTime = own, time.Now()
	}
	return g.own[a]
}

// normHost is a host as the policy matches it: lower case, no trailing
// dot, an IP literal in canonical form without brackets.
func normHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")), ".")
	if a, err := netip.ParseAddr(h); err == nil {
		return a.WithZone("").String()
	}
	return h
}

// validHost refuses names no resolver should see: empty, too long, or
// with characters outside a host name's.
func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return !strings.Contains(h, "..") && !strings.HasPrefix(h, ".")
}

var errNoAddress = errors.New("no address")

// lookup resolves host once: an IP literal is itself, a pinned name its
// pins, any other name what the resolver answers.
func (p *Proxy) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	if pins, ok := p.o.Resolve[host]; ok {
		return pins, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.DialTimeout)
	defer cancel()
	// Fully qualified: no search domain of the host's makes it another name.
	addrs, err := p.resolver.LookupNetIP(ctx, "ip", host+".")
	if err != nil {
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			return nil, errNoAddress
		}
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, errNoAddress
	}
	return addrs, nil
}
