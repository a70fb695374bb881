package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
)

// refusal is why an attempt got no connection, and how to say so to the
// sandbox.
type refusal struct {
	status int  // the HTTP status
	socks  byte // the SOCKS5 reply
	rule   string
	reason string
	// addr is the address refused, when one was.
	addr string
	// allowed: the policy allowed it but the connection failed (an
	// event with Decision allow and Error reason).
	allowed bool
}

func denied(rule, reason string) *refusal {
	return &refusal{status: 403, socks: socksRuleset, rule: rule, reason: reason}
}

// maxAnswers bounds the addresses of one name the proxy checks and tries.
const maxAnswers = 16

type candidate struct {
	addr netip.Addr
	d    Decision
}

// check decides a connection to host:port (method: a plain HTTP
// request's, else ""): the policy by name first (a name the policy
// refuses is never resolved), then each address the name resolves to.
func (p *Proxy) check(ctx context.Context, eff Effective, host string, port int, method string) ([]candidate, *refusal) {
	if p.spent.Load() {
		return nil, denied("", p.bytesReason())
	}
	if !validHost(host) {
		return nil, denied("", fmt.Sprintf("%q is not a host name", capString(host, 64)))
	}
	if port == 25 {
		return nil, denied("", "port 25 (mail) is never opened")
	}
	byName := eff.Decide(host, netip.Addr{}, port, method)
	if !byName.Allowed && (byName.Rule != "" || !addrMayAllow(eff, port)) {
		return nil, denied(byName.Rule, byName.Reason)
	}
	addrs, err := p.lookup(ctx, host)
	if err != nil {
		r := denied("", "cannot resolve "+host+": "+lookupError(err))
		r.status, r.socks = 502, socksHostUnreachable
		return nil, r
	}
	var cands []candidate
	var first *refusal
	for _, a := range addrs[:min(len(addrs), maxAnswers)] {
		a = a.WithZone("")
		if why := p.guard.refused(a, port); why != "" {
			if first == nil || first.rule != "" {
				first = denied("", why)
				first.addr = a.String()
			}
			continue
		}
		d := eff.Decide(host, a, port, method)
		if !d.Allowed {
			if first == nil {
				first = denied(d.Rule, d.Reason)
				first.addr = a.String()
			}
			continue
		}
		cands = append(cands, candidate{a, d})
	}
	if len(cands) == 0 {
		if first == nil {
			first = denied("", "cannot resolve "+host+": no address")
		}
		return nil, first
	}
	return cands, nil
}

// addrMayAllow says an allow entry could admit port by address though
// not by name.
func addrMayAllow(eff Effective, port int) bool {
	if eff.Mode == ModeOpen {
		return true
	}
	for _, r := range eff.Allow {
		if r.IsIP() && r.MatchesPort(port) {
			return true
		}
	}
	return false
}

func lookupError(err error) string {
	if errors.Is(err, errNoAddress) {
		return "no address"
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		if de.IsTimeout {
			return "timed out"
		}
		return capString(de.Err, 100)
	}
	return "lookup failed"
}

// dial connects to the first candidate that answers: always a checked
// address, never a name the dialer would resolve again.
func (p *Proxy) dial(ctx context.Context, s *stream, a *attempt, host string, port int, cands []candidate) (*upstream, *refusal) {
	d := net.Dialer{Timeout: p.o.DialTimeout}
	var last error
	for _, c := range cands {
		a.ev.Addr = c.addr.String()
		a.ev.Rule, a.ev.Reason = c.d.Rule, c.d.Reason
		conn, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(c.addr, uint16(port)).String())
		if err != nil {
			last = err
			continue
		}
		up := &upstream{Conn: conn, p: p, w: s.w, host: host, port: port, addr: c.addr}
		up.a.Store(a)
		if !s.setUpstream(up) {
			return nil, &refusal{status: 502, socks: socksFailure, reason: "closed", allowed: true}
		}
		return up, nil
	}
	r := &refusal{status: 502, socks: socksHostUnreachable, allowed: true,
		reason: "connect " + net.JoinHostPort(a.ev.Addr, strconv.Itoa(port)) + ": " + dialError(last)}
	if errors.Is(last, syscall.ECONNREFUSED) {
		r.socks = socksRefused
	}
	return nil, r
}

func dialError(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "timed out"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timed out"
	}
	return "unreachable"
}

// open checks and dials host:port for one attempt, refusing (and
// recording) what it must; for a CONNECT or SOCKS tunnel (method "") it
// also says which secret, if any, the connection needs terminated for.
func (p *Proxy) open(s *stream, a *attempt, host string, port int, method string) (up *upstream, secret string, term bool, r *refusal) {
	eff := p.effective()
	ctx, cancel := context.WithTimeout(p.ctx, 2*p.o.DialTimeout)
	defer cancel()
	cands, r := p.check(ctx, eff, host, port, method)
	if r != nil {
		a.ev.Addr = r.addr
		return nil, "", false, r
	}
	if method == "" {
		secret, term = eff.Terminated(host, cands[0].addr, port)
		if term && p.o.Terminator == nil {
			a.ev.Addr = cands[0].addr.String()
			return nil, "", false, denied(cands[0].d.Rule, "needs TLS termination, which this proxy lacks")
		}
	}
	up, r = p.dial(ctx, s, a, host, port, cands)
	return up, secret, term, r
}
