package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// helloTimeout bounds reading a TLS ClientHello once its first byte came.
const helloTimeout = 10 * time.Second

// serveHTTP serves s as an HTTP proxy: plain requests in absolute form,
// each decided and forwarded, until one is a CONNECT or s ends.
func (p *Proxy) serveHTTP(s *stream) {
	bw := bufio.NewWriterSize(s.tc, 8<<10)
	for {
		s.head.n = maxHead
		req, err := http.ReadRequest(s.br)
		s.head.n = -1
		if err != nil {
			p.badRequest(s, err)
			return
		}
		if req.Method == http.MethodConnect {
			p.serveCONNECT(s, req)
			return
		}
		if s.up != nil && !p.reusable(s.up, req) {
			s.dropUpstream()
		}
		if !p.forward(s, bw, req) {
			return
		}
	}
}

// badRequest answers a request the proxy cannot read, and records it.
func (p *Proxy) badRequest(s *stream, err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || s.idled.Load() {
		return // the client is done
	}
	status, why := 400, "malformed request"
	if errors.Is(err, errHeadTooLarge) {
		status, why = 431, "request header block over 64 KiB"
	}
	a := p.begin("http", "", 0)
	r := denied("", why)
	r.status = status
	a.deny(r)
	writeRefusal(s.tc, "", r)
}

// reusable says up may carry req: same host and port as before (the
// policy is applied again by upstreamFor).
func (p *Proxy) reusable(up *upstream, req *http.Request) bool {
	host, port, err := requestTarget(req)
	return err == nil && host == up.host && port == up.port
}

// requestTarget is a plain request's host and port; only absolute http://
// URIs are proxied.
func requestTarget(req *http.Request) (string, int, error) {
	if !req.URL.IsAbs() || req.URL.Scheme != "http" || req.URL.Host == "" {
		return "", 0, errors.New("only absolute http:// URIs are proxied (use CONNECT for https)")
	}
	port := 80
	if ps := req.URL.Port(); ps != "" {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 || n > 65535 {
			return "", 0, fmt.Errorf("bad port %q", capString(ps, 8))
		}
		port = n
	}
	return normHost(req.URL.Hostname()), port, nil
}

// forward decides one plain request and, when allowed, sends it upstream
// and its response back through bw. It says whether s may carry another
// request.
func (p *Proxy) forward(s *stream, bw *bufio.Writer, req *http.Request) bool {
	host, port, err := requestTarget(req)
	a := p.begin("http", host, port)
	a.ev.Method, a.ev.Path = capString(req.Method, 16), capString(req.URL.Path, maxPath)
	if err != nil {
		r := denied("", err.Error())
		r.status = 400
		a.deny(r)
		writeRefusal(s.tc, "", r)
		return false
	}
	target := net.JoinHostPort(host, strconv.Itoa(port))
	reused := s.up != nil
	up, r := p.upstreamFor(s, a, host, port, req.Method)
	if r != nil {
		a.deny(r)
		writeRefusal(s.tc, target, r)
		return false
	}
	// The checked authority, not the client's Host header, goes upstream:
	// no fronting another site behind an allowed address.
	req.Host = ""
	prepare(req)
	if req.Header.Get("Expect") == "100-continue" {
		req.Header.Del("Expect")
		io.WriteString(s.tc, "HTTP/1.1 100 Continue\r\n\r\n")
	}
	answered, err := p.roundTrip(s, bw, up, req)
	if err != nil && reused && !answered && (req.Body == nil || req.Body == http.NoBody) {
		// The kept upstream connection had gone; one fresh one.
		s.dropUpstream()
		if up, r = p.upstreamFor(s, a, host, port, req.Method); r != nil {
			a.deny(r)
			writeRefusal(s.tc, target, r)
			return false
		}
		answered, err = p.roundTrip(s, bw, up, req)
	}
	a.end(err)
	return err == nil && !req.Close
}

// upstreamFor is s's upstream for a request to host:port: the kept one,
// decided again under the policy now in force, or a newly opened one.
func (p *Proxy) upstreamFor(s *stream, a *attempt, host string, port int, method string) (*upstream, *refusal) {
	up := s.up
	if up == nil {
		up, _, _, r := p.open(s, a, host, port, method)
		if r != nil {
			return nil, r
		}
		up.head = &headLimit{r: up, n: -1}
		up.br = bufio.NewReaderSize(up.head, 4096)
		return up, nil
	}
	a.ev.Addr = up.addr.String()
	if p.spent.Load() {
		return nil, denied("", p.bytesReason())
	}
	d := p.effective().Decide(host, up.addr, port, method)
	if !d.Allowed {
		return nil, denied(d.Rule, d.Reason)
	}
	a.ev.Rule, a.ev.Reason = d.Rule, d.Reason
	up.a.Store(a)
	return up, nil
}

// prepare makes a client's request one to send upstream: no hop-by-hop
// or Proxy-* header, and no User-Agent the client did not send.
func prepare(req *http.Request) {
	stripHop(req.Header)
	req.RequestURI = ""
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // Write would add Go's
	}
}

// roundTrip writes req to up and its response to the client through bw.
// answered says some of a response reached the client.
func (p *Proxy) roundTrip(s *stream, bw *bufio.Writer, up *upstream, req *http.Request) (answered bool, _ error) {
	uw := bufio.NewWriterSize(up, 8<<10)
	if req.Body != nil && req.Body != http.NoBody {
		req.Body = flushing{req.Body, s.br, uw}
	}
	err := req.Write(uw)
	if err == nil {
		err = uw.Flush()
	}
	if err != nil {
		return false, fmt.Errorf("send request: %w", err)
	}
	for {
		up.head.n = maxHead + int64(up.br.Size())
		resp, err := http.ReadResponse(up.br, req)
		up.head.n = -1
		if err != nil {
			if errors.Is(err, errHeadTooLarge) {
				writeRefusal(s.tc, "", &refusal{status: 502, reason: "response header block over 64 KiB"})
				return true, err
			}
			return false, fmt.Errorf("read response: %w", err)
		}
		stripHop(resp.Header)
		resp.Body = flushing{resp.Body, up.br, bw}
		err = resp.Write(bw)
		if err == nil {
			err = bw.Flush()
		}
		resp.Body.Close()
		if err != nil {
			return true, fmt.Errorf("send response: %w", err)
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != 101 {
			continue
		}
		if resp.Close || resp.StatusCode == 101 {
			return true, errCloseQuiet
		}
		return true, nil
	}
}

// flushing is a body copied through a buffered writer: before a read
// that would wait for the network, what is buffered goes out, so a
// streamed body is not held back.
type flushing struct {
	io.ReadCloser
	src *bufio.Reader
	w   *bufio.Writer
}

func (f flushing) Read(b []byte) (int, error) {
	if f.src.Buffered() == 0 && f.w.Buffered() > 0 {
		if err := f.w.Flush(); err != nil {
			return 0, err
		}
	}
	return f.ReadCloser.Read(b)
}

// errCloseQuiet ends a stream without an error in the event.
var errCloseQuiet = io.EOF

// hopHeaders are the hop-by-hop headers a proxy drops.
var hopHeaders = []string{"Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// stripHop removes the hop-by-hop headers, those Connection names, and
// every Proxy-* header.
func stripHop(h http.Header) {
	for _, v := range h["Connection"] {
		for _, f := range strings.Split(v, ",") {
			h.Del(textproto.TrimString(f))
		}
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
	for k := range h {
		if strings.HasPrefix(k, "Proxy-") {
			delete(h, k)
		}
	}
}

// writeRefusal tells the sandbox why: a short text body naming target.
func writeRefusal(w io.Writer, target string, r *refusal) {
	body := "agentbox egress proxy: refused " + target + ": " + r.reason + "\n"
	if target == "" {
		body = "agentbox egress proxy: refused: " + r.reason + "\n"
	}
	how := "denied"
	if r.allowed {
		how = "failed"
	}
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nX-Agentbox-Egress: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		r.status, http.StatusText(r.status), how, len(body), body)
}

// serveCONNECT opens a tunnel: checked, dialed, answered 200, then either
// handed to the Terminator or copied both ways once the client's TLS
// server name, if any, matches.
func (p *Proxy) serveCONNECT(s *stream, req *http.Request) {
	hostport := req.RequestURI
	h, ps, err := net.SplitHostPort(hostport)
	port, perr := strconv.Atoi(ps)
	host := normHost(h)
	a := p.begin("connect", host, port)
	if err != nil || perr != nil || port < 1 || port > 65535 {
		r := denied("", "CONNECT wants host:port")
		r.status = 400
		a.deny(r)
		writeRefusal(s.tc, "", r)
		return
	}
	target := net.JoinHostPort(host, strconv.Itoa(port))
	up, secret, term, r := p.open(s, a, host, port, "")
	if r != nil {
		a.deny(r)
		writeRefusal(s.tc, target, r)
		return
	}
	if _, err := io.WriteString(s.tc, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		a.end(err)
		return
	}
	p.tunnel(s, a, up, host, port, secret, term)
}

// tunnel carries an opened connection (CONNECT or SOCKS5) to its end.
func (p *Proxy) tunnel(s *stream, a *attempt, up *upstream, host string, port int, secret string, term bool) {
	if term {
		a.ev.Secret = secret
		addr := up.addr
		err := p.o.Terminator.Terminate(p.ctx, s.client(), Termination{
			Host: host, Port: port, Secret: secret, Upstream: up,
			Decide: func(method, path string) Decision {
				if p.spent.Load() {
					return Decision{Reason: p.bytesReason()}
				}
				return p.effective().Decide(host, addr, port, method)
			},
			Seen: a.seen,
		})
		a.end(err)
		return
	}
	// The server may speak first; the client's bytes wait for the check.
	var clean, hello atomic.Bool
	down := make(chan error, 1)
	retry := make(chan bool, 1)
	client := s.client()
	go func() { down <- copyDown(client, up, &hello, retry, &clean) }()
	var err error
	if p.looksHTTP(s) {
		if err = p.copyHTTP(s, a, up, port); err == nil {
			clean.Store(true)
		} else {
			client.Close()
			up.Close()
		}
	} else if err = p.checkHello(s, up, host, &hello); err == nil {
		if hello.Load() && <-retry {
			err = p.checkRetryHello(s, up, host)
		}
		if err == nil {
			err = copyHalf(up, client, &clean)
		} else {
			client.Close()
			up.Close()
		}
	} else {
		client.Close()
		up.Close()
	}
	err = errors.Join(err, <-down)
	if s.idled.Load() && err != nil {
		err = fmt.Errorf("idle for %s", p.o.Idle)
	}
	if r, ok := errors.AsType[*helloRefusal](err); ok {
		a.deny(denied("", r.reason))
		return
	}
	a.end(err)
}

// helloRefusal is a tunnel refused for its TLS ClientHello.
type helloRefusal struct{ reason string }

func (r *helloRefusal) Error() string { return r.reason }

// checkHello reads the client's TLS ClientHello, if its first bytes are
// one, refuses a server name other than host, and sends what it read on
// to up. Bytes that are not TLS go through unread.
func (p *Proxy) checkHello(s *stream, up *upstream, host string, sent *atomic.Bool) error {
	first, err := s.br.Peek(1)
	if err != nil || first[0] != 0x16 {
		return nil // the copy sees the same end, or the same bytes
	}
	s.c.SetReadDeadline(time.Now().Add(helloTimeout))
	raw, sni, err := readHello(s.br)
	s.c.SetReadDeadline(time.Time{})
	if err != nil {
		return &helloRefusal{"TLS ClientHello unreadable or incomplete within " + helloTimeout.String()}
	}
	if sni != "" && normHost(sni) != host {
		name := normHost(sni)
		if !validHost(name) {
			name = strconv.Quote(capString(sni, 64))
		}
		return &helloRefusal{fmt.Sprintf("TLS server name %s differs from the host asked for %s", name, host)}
	}
	sent.Store(true) // what the server sends now answers it
	_, err = up.Write(raw)
	return err
}
