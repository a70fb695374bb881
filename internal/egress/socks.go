package egress

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/agentbox/agentbox/internal/event"
)

// SOCKS5 (RFC 1928), the parts the proxy speaks: no authentication, the
// CONNECT command, names resolved by the proxy (socks5h).
const (
	socksVersion         = 0x05
	socksNoAuth          = 0x00
	socksNoMethod        = 0xff
	socksConnect         = 0x01
	socksSucceeded       = 0x00
	socksFailure         = 0x01
	socksRuleset         = 0x02
	socksHostUnreachable = 0x04
	socksRefused         = 0x05
	socksBadCommand      = 0x07
	socksBadAddress      = 0x08
)

// socksRequest is a CONNECT request's destination.
type socksRequest struct {
	host string
	port int
}

var errSOCKS = errors.New("malformed SOCKS5 request")

// readSOCKS reads the greeting, answers it and reads the request. cmd
// and atyp are what the client asked when they are not supported.
func readSOCKS(r io.Reader, w io.Writer) (req socksRequest, reply byte, err error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil || hdr[0] != socksVersion {
		return req, 0, errSOCKS
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(r, methods); err != nil {
		return req, 0, errSOCKS
	}
	hasNoAuth := false
	for _, m := range methods {
		hasNoAuth = hasNoAuth || m == socksNoAuth
	}
	if !hasNoAuth {
		w.Write([]byte{socksVersion, socksNoMethod})
		return req, 0, errors.New("SOCKS5 client offers no method but no authentication")
	}
	if _, err := w.Write([]byte{socksVersion, socksNoAuth}); err != nil {
		return req, 0, err
	}
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil || head[0] != socksVersion {
		return req, 0, errSOCKS
	}
	switch head[3] {
	case 0x01, 0x04:
		b := make([]byte, 4*int(head[3]))
		if _, err := io.ReadFull(r, b); err != nil {
			return req, 0, errSOCKS
		}
		a, _ := netip.AddrFromSlice(b)
		req.host = a.Unmap().String()
		if a.Is6() && !a.Is4In6() {
			req.host = a.String()
		}
	case 0x03:
		var n [1]byte
		if _, err := io.ReadFull(r, n[:]); err != nil || n[0] == 0 {
			return req, 0, errSOCKS
		}
		b := make([]byte, n[0])
		if _, err := io.ReadFull(r, b); err != nil {
			return req, 0, errSOCKS
		}
		req.host = normHost(string(b))
	default:
		return req, socksBadAddress, errors.New("SOCKS5 address type not supported")
	}
	var port [2]byte
	if _, err := io.ReadFull(r, port[:]); err != nil {
		return req, 0, errSOCKS
	}
	req.port = int(binary.BigEndian.Uint16(port[:]))
	if head[1] != socksConnect {
		return req, socksBadCommand, errors.New("SOCKS5 command not supported: only CONNECT")
	}
	return req, 0, nil
}

// writeSOCKSReply answers a request; the bound address is not told.
func writeSOCKSReply(w io.Writer, code byte) error {
	_, err := w.Write([]byte{socksVersion, code, 0, 0x01, 0, 0, 0, 0, 0, 0})
	return err
}

// serveSOCKS serves s as a SOCKS5 proxy: one CONNECT, then a tunnel.
func (p *Proxy) serveSOCKS(s *stream) {
	s.c.SetReadDeadline(time.Now().Add(helloTimeout))
	req, reply, err := readSOCKS(s.br, s.tc)
	s.c.SetReadDeadline(time.Time{})
	a := p.begin("socks5", req.host, req.port)
	if err != nil {
		if reply != 0 {
			writeSOCKSReply(s.tc, reply)
		}
		a.deny(denied("", err.Error()))
		return
	}
	up, secret, term, r := p.open(s, a, req.host, req.port, "")
	if r != nil {
		a.deny(r)
		writeSOCKSReply(s.tc, r.socks)
		return
	}
	if err := writeSOCKSReply(s.tc, socksSucceeded); err != nil {
		a.end(err)
		return
	}
	p.tunnel(s, a, up, req.host, req.port, secret, term)
}

// refuseBusy tells a stream over the connection bound (or arriving after
// Close) why, reading no more of it than needed to name its target, for
// at most two seconds.
func (p *Proxy) refuseBusy(c net.Conn, reason string) {
	c.SetDeadline(time.Now().Add(2 * time.Second))
	r := denied("", reason)
	r.status = 429
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		p.record(event.Network{Decision: "deny", Protocol: "unknown", Reason: reason})
		return
	}
	src := io.MultiReader(bytes.NewReader(first[:]), io.LimitReader(c, 4096))
	if first[0] == socksVersion {
		req, _, _ := readSOCKS(src, c)
		a := p.begin("socks5", req.host, req.port)
		a.deny(r)
		writeSOCKSReply(c, socksRuleset)
		return
	}
	a := p.begin("http", "", 0)
	if req, err := http.ReadRequest(bufio.NewReaderSize(src, 4096)); err == nil {
		a.ev.Host, a.ev.Port = targetOf(req)
		a.ev.Host = capString(a.ev.Host, maxHost)
		if req.Method == http.MethodConnect {
			a.ev.Protocol = "connect"
		} else {
			a.ev.Method, a.ev.Path = capString(req.Method, 16), capString(req.URL.Path, maxPath)
		}
	}
	a.deny(r)
	target := ""
	if a.ev.Host != "" {
		target = net.JoinHostPort(a.ev.Host, strconv.Itoa(a.ev.Port))
	}
	writeRefusal(c, target, r)
}

// targetOf is the host and port a request names, as far as it does.
func targetOf(req *http.Request) (string, int) {
	if req.Method == http.MethodConnect {
		h, ps, _ := net.SplitHostPort(req.RequestURI)
		port, _ := strconv.Atoi(ps)
		return normHost(h), port
	}
	host, port, err := requestTarget(req)
	if err != nil {
		return "", 0
	}
	return host, port
}
