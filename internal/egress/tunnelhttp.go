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
// be) an HTTP request: a line, leading blank lines skipped, whose last
// word starts with "HTTP/"; or, when no line end comes within
// maxRequestLine bytes or helloTimeout, a token followed by white space.
func (p *Proxy) looksHTTP(s *stream) bool {
	first, err := s.br.Peek(1)
	if err != nil || first[0] == 0x16 {
		return false
	}
	s.c.SetReadDeadline(time.Now().Add(helloTimeout))
	defer s.c.SetReadDeadline(time.Time{})
	var b []byte
	complete := false
	for n := 1; n <= maxRequestLine; n = max(n+1, s.br.Buffered()) {
		if b, err = s.br.Peek(n); err != nil {
			break
		}
		line := bytes.TrimLeft(b, "\r\n\t ")
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			b, complete = line[:i], true
			break
		}
		if n == maxRequestLine {
			break
		}
	}
	words := bytes.FieldsFunc(b, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\r' || r == '\v' || r == '\f'
	})
	if complete {
		return len(words) >= 2 && bytes.HasPrefix(bytes.ToUpper(words[len(words)-1]), []byte("HTTP/"))
	}
	line := bytes.TrimLeft(b, "\r\n\t ")
	return len(words) >= 2 && len(line) > len(words[0]) && isToken(words[0])
}

func isToken(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c >= 0x7f || bytes.IndexByte([]byte(`"(),/:;<=>?@[\]{}`), c) >= 0 {
			return false
		}
	}
	return true
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
