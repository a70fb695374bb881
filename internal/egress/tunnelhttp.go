package egress

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Plain HTTP inside a CONNECT or SOCKS5 tunnel. The tunnel was decided by
// its host, but a plain HTTP server (a CDN's front above all) routes each
// request by its own Host header or absolute URI: an allowed tunnel to
// cdn.example:80 carrying "Host: evil.example" would reach evil.example
// (domain fronting without TLS). So a tunnel whose first bytes are an HTTP
// request is read request by request: each one's host is decided by the
// policy as a plain request would be (at the tunnel's address), and only
// then written upstream, re-framed.

// maxRequestLine is how much of a tunnel's first line is looked at.
const maxRequestLine = 4096

// looksHTTP says whether the client's first bytes in a tunnel are (or may
// be) an HTTP request: blank lines, then a token (the method) and white
// space, then a line whose last word starts with "HTTP/"; a line that
// does not end within maxRequestLine bytes or helloTimeout counts too.
// A byte that cannot begin a request line (TLS, a binary protocol's first
// byte, SSH's banner's end) decides at once, so other protocols are not
// held up.
func (p *Proxy) looksHTTP(s *stream) bool {
	first, err := s.br.Peek(1)
	if err != nil || first[0] == 0x16 {
		return false
	}
	s.c.SetReadDeadline(time.Now().Add(helloTimeout))
	defer s.c.SetReadDeadline(time.Time{})
	const leading, method, rest = 0, 1, 2
	state, i := leading, 0
	for n := 1; ; n = max(n+1, s.br.Buffered()) {
		b, err := s.br.Peek(n)
		for ; i < len(b); i++ {
			c := b[i]
			switch {
			case state == leading && (c == '\r' || c == '\n' || c == ' ' || c == '\t'):
			case state != rest && isTokenByte(c):
				state = method
			case state == method && (c == ' ' || c == '\t' || c == '\v' || c == '\f' || c == '\r'):
				state = rest
			case state != rest:
				return false
			case c == '\n':
				words := bytes.FieldsFunc(b[:i], func(r rune) bool {
					return r == ' ' || r == '\t' || r == '\r' || r == '\v' || r == '\f' || r == '\n'
				})
				return bytes.HasPrefix(bytes.ToUpper(words[len(words)-1]), []byte("HTTP/"))
			}
		}
		if err != nil || n >= maxRequestLine {
			return state == rest // an unfinished request line: read it as one
		}
	}
}

func isTokenByte(c byte) bool {
	return c > ' ' && c < 0x7f && bytes.IndexByte([]byte(`"(),/:;<=>?@[\]{}`), c) < 0
}

// copyHTTP carries the client's requests in a tunnel to up one by one,
// each refused (a *helloRefusal) unless the policy allows its host at the
// tunnel's address and port.
func (p *Proxy) copyHTTP(s *stream, a *attempt, up *upstream, port int) error {
	for {
		s.head.n = maxHead
		req, err := http.ReadRequest(s.br)
		s.head.n = -1
		var ne net.Error
		switch {
		case err == nil:
		case s.br.Buffered() == 0 && errors.Is(err, io.EOF):
			closeWrite(up)
			return nil
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), errors.As(err, &ne):
			return err // the client went away
		default:
			return &helloRefusal{"unreadable HTTP request inside the tunnel"}
		}
		host, hport := req.Host, ""
		if h, ps, err := net.SplitHostPort(host); err == nil {
			host, hport = h, ps
		}
		host = normHost(host)
		if hport != "" && hport != strconv.Itoa(port) || !validHost(host) {
			return &helloRefusal{fmt.Sprintf("HTTP request inside the tunnel for %q, another host than the tunnel's", capString(req.Host, 64))}
		}
		if d := p.effective().Decide(host, up.addr, port, req.Method); !d.Allowed {
			return &helloRefusal{"HTTP request inside the tunnel for another host: " + d.Reason}
		}
		a.seen(req.Method, req.URL.Path)
		// Neither an upgrade nor a proxy's CONNECT: after either, what
		// follows would no longer be read as requests.
		if req.Method == http.MethodConnect {
			return &helloRefusal{"CONNECT inside a tunnel"}
		}
		req.Header.Del("Upgrade")
		if _, ok := req.Header["User-Agent"]; !ok {
			req.Header["User-Agent"] = []string{""} // Write would add Go's
		}
		if err := req.Write(up); err != nil {
			return err
		}
	}
}
