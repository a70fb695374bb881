package egress

// secrets_relay.go is the HTTP/1.1 relay inside a connection the broker
// terminates: it reads the sandbox's requests one by one, asks the policy,
// sets the secret's header, forwards each over one verified TLS connection
// upstream, and streams the response back with the value scrubbed.

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

const (
	brokerHandshakeTimeout = 10 * time.Second
	// brokerMaxHeader bounds a request's or response's header bytes.
	brokerMaxHeader = 64 << 10
	// brokerMaxURI bounds a request's target.
	brokerMaxURI = 8 << 10
	// brokerMaxDrain is how much of a refused request's body is read to
	// keep the connection; past it the connection is closed.
	brokerMaxDrain = 256 << 10
	// brokerWriteGrace is how long a request's upload may go on after its
	// response has ended before the connection is closed.
	brokerWriteGrace = 2 * time.Second
	brokerBufSize    = 32 << 10
)

// brokerHopHeaders are the hop-by-hop headers (RFC 9110 7.6.1), never
// forwarded either way.
var brokerHopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// Terminate serves the sandbox's TLS connection client to t.Host with a
// certificate of the job's CA, and relays its HTTP/1.1 requests over one
// TLS connection on t.Upstream, verified against the real certificate.
// Each request is put to t.Decide (a refusal is a 403 and the connection
// goes on); an allowed one loses the headers the sandbox set under the
// secret's header name and gets the real one, is reported to t.Seen and
// forwarded. Responses are streamed back with every occurrence of the
// value, in headers and body, replaced by the placeholder: a body that
// needs scrubbing loses its Content-Length and goes chunked. Terminate
// closes client and t.Upstream when it returns; it returns nil when the
// sandbox closes between requests.
func (b *Broker) Terminate(ctx context.Context, client net.Conn, t Termination) error {
	defer client.Close()
	defer t.Upstream.Close()
	stop := context.AfterFunc(ctx, func() { client.Close(); t.Upstream.Close() })
	defer stop()

	host := strings.TrimSuffix(strings.ToLower(t.Host), ".")
	srv := tls.Server(client, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			sni := strings.TrimSuffix(hello.ServerName, ".")
			_, notIP := netip.ParseAddr(host)
			// A client sends no server name for an IP literal (RFC 6066).
			if !strings.EqualFold(sni, host) && !(sni == "" && notIP == nil) {
				return nil, fmt.Errorf("server name %q is not %s", sni, host)
			}
			return b.leaf(host)
		},
	})
	hctx, cancel := context.WithTimeout(ctx, brokerHandshakeTimeout)
	err := srv.HandshakeContext(hctx)
	cancel()
	if err != nil {
		return fmt.Errorf("broker handshake with sandbox for %s: %w", host, err)
	}
	r := &brokerRelay{b: b, t: t, host: host, ctx: ctx, client: client}
	r.cin = &headLimit{r: srv, over: io.EOF}
	r.cr = bufio.NewReaderSize(r.cin, brokerBufSize)
	r.cw = bufio.NewWriterSize(srv, brokerBufSize)
	return r.serve()
}

// brokerRelay is one terminated connection.
type brokerRelay struct {
	b      *Broker
	t      Termination
	host   string
	ctx    context.Context
	client net.Conn

	cin *headLimit
	cr  *bufio.Reader
	cw  *bufio.Writer

	up  *tls.Conn // nil until the first forwarded request
	uin *headLimit
	ur  *bufio.Reader

	head bool // the request being answered is a HEAD: answers have no body
}

// serve relays requests until either side closes or one cannot go on.
func (r *brokerRelay) serve() error {
	for {
		r.head = false
		r.cin.n = brokerMaxHeader + brokerBufSize
		req, err := http.ReadRequest(r.cr)
		if err != nil {
			if errors.Is(err, io.EOF) && r.cr.Buffered() == 0 && r.cin.n > 0 {
				return nil
			}
			if r.cin.n <= 0 {
				r.reply(http.StatusRequestHeaderFieldsTooLarge, "", "request headers over 64 KiB", true)
			} else {
				r.reply(http.StatusBadRequest, "", "malformed request", true)
			}
			return fmt.Errorf("broker read request for %s: %w", r.host, err)
		}
		r.cin.n = -1
		r.head = req.Method == http.MethodHead
		more, err := r.one(req)
		if err != nil || !more {
			return err
		}
	}
}

// one answers one request; more says the connection goes on.
func (r *brokerRelay) one(req *http.Request) (more bool, err error) {
	if len(req.RequestURI) > brokerMaxURI {
		return false, r.reply(http.StatusRequestURITooLong, "", "request target over 8 KiB", true)
	}
	if req.Method == http.MethodConnect || req.Header.Get("Upgrade") != "" {
		return false, r.reply(http.StatusNotImplemented, "", "CONNECT and Upgrade are not relayed inside a terminated connection", true)
	}
	path := req.URL.Path
	if path == "" {
		path = "/"
	}
	if r.t.Decide == nil { // the proxy allowed the connection and restricts nothing
		r.t.Decide = func(string, string) Decision { return Decision{Allowed: true} }
	}
	if d := r.t.Decide(req.Method, path); !d.Allowed {
		return r.refuse(req, http.StatusForbidden, "denied", "refused "+r.host+": "+d.Reason)
	}
	var inj brokerInjection
	if r.t.Secret != "" {
		if inj, err = r.b.injection(r.t.Secret, r.host, cmp.Or(r.t.Port, 443)); err != nil {
			return r.refuse(req, http.StatusBadGateway, "error", err.Error())
		}
	}
	if r.up == nil {
		if err := r.dialUpstream(); err != nil {
			r.reply(http.StatusBadGateway, "error", fmt.Sprintf("upstream %s: %v", r.host, err), true)
			return false, err
		}
	}
	r.prepare(req, inj)
	if r.t.Seen != nil {
		r.t.Seen(req.Method, path)
	}
	return r.forward(req, inj)
}

// refuse answers req with code without forwarding it, reading what is left
// of its body (up to brokerMaxDrain) so the connection can go on.
func (r *brokerRelay) refuse(req *http.Request, code int, tag, msg string) (bool, error) {
	closeAfter := req.Close || req.Header.Get("Expect") != ""
	if !closeAfter {
		n, _ := io.CopyN(io.Discard, req.Body, brokerMaxDrain+1)
		closeAfter = n > brokerMaxDrain
	}
	if err := r.reply(code, tag, msg, closeAfter); err != nil {
		return false, err
	}
	return !closeAfter, nil
}

// reply writes the proxy's own answer: a plain-text body starting
// "agentbox egress proxy: ", with X-Agentbox-Egress: tag when tag is set.
func (r *brokerRelay) reply(code int, tag, msg string, closeAfter bool) error {
	body := "agentbox egress proxy: " + msg + "\n"
	fmt.Fprintf(r.cw, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n", code, http.StatusText(code), len(body))
	if tag != "" {
		fmt.Fprintf(r.cw, "X-Agentbox-Egress: %s\r\n", tag)
	}
	if closeAfter {
		r.cw.WriteString("Connection: close\r\n")
	}
	r.cw.WriteString("\r\n")
	if !r.head {
		r.cw.WriteString(body)
	}
	return r.cw.Flush()
}

// dialUpstream starts TLS on t.Upstream, verifying the real certificate
// for the host against the broker's roots.
func (r *brokerRelay) dialUpstream() error {
	up := tls.Client(r.t.Upstream, &tls.Config{
		ServerName: r.host,
		RootCAs:    r.b.roots,
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
		// Resuming a session verified before skips the chain's checks,
		// not the verification: Go resumes only sessions it verified.
		ClientSessionCache: r.b.sessions,
	})
	hctx, cancel := context.WithTimeout(r.ctx, brokerHandshakeTimeout)
	defer cancel()
	if err := up.HandshakeContext(hctx); err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	r.up = up
	r.uin = &headLimit{r: up, n: -1, over: io.EOF}
	r.ur = bufio.NewReaderSize(r.uin, brokerBufSize)
	return nil
}

// prepare makes req ready to go upstream: hop-by-hop headers out, the Host
// forced to the terminated host (a sandbox's own Host could route the
// secret to another site behind the same front), the secret's header
// replaced by the real one, the body asked for whole and uncompressed (the
// scrubbing reads it verbatim), and Expect answered here.
func (r *brokerRelay) prepare(req *http.Request, inj brokerInjection) {
	brokerDropHop(req.Header)
	req.Host = r.host
	if _, err := netip.ParseAddr(r.host); err == nil && strings.Contains(r.host, ":") {
		req.Host = "[" + r.host + "]"
	}
	if r.t.Port != 443 && r.t.Port != 0 {
		req.Host = net.JoinHostPort(r.host, strconv.Itoa(r.t.Port))
	}
	req.URL.Scheme, req.URL.Host, req.URL.User = "", "", nil
	req.Trailer = nil
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // Request.Write would add Go's
	}
	if inj.header != "" {
		req.Header.Del(inj.header)
		req.Header.Set(inj.header, inj.headerValue)
		// The scrubbing must see every echo whole: no compressed body, and
		// no range, which could cut an echoed value into pieces that each
		// pass (a byte range at a time would spell it out).
		req.Header.Set("Accept-Encoding", "identity")
		req.Header.Del("Range")
		req.Header.Del("If-Range")
	}
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		req.Header.Del("Expect")
		r.cw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
		r.cw.Flush()
	}
}

func brokerDropHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range brokerHopHeaders {
		h.Del(name)
	}
}

// forward sends req upstream (its body streamed from the sandbox while the
// response is read) and streams the response back.
func (r *brokerRelay) forward(req *http.Request, inj brokerInjection) (bool, error) {
	wrote := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(r.up, brokerBufSize)
		err := req.Write(w)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			r.up.Close() // the response cannot come: unblock its reader
		}
		wrote <- err
	}()
	// Either way out of an unfinished exchange closes both sides: the
	// upload may be blocked on the sandbox or on the upstream.
	abort := func() { r.up.Close(); r.client.Close(); <-wrote }
	keep, err := r.response(req, inj)
	if err != nil {
		abort()
		return false, err
	}
	if !keep || req.Close {
		// The answer is out and the connection ends with it: an upload
		// the upstream did not read to the end is no error.
		abort()
		return false, nil
	}
	grace := time.NewTimer(brokerWriteGrace)
	defer grace.Stop()
	select {
	case werr := <-wrote:
		if werr != nil {
			return false, fmt.Errorf("broker write request to %s: %w", r.host, werr)
		}
	case <-grace.C:
		abort()
		return false, nil
	}
	return true, nil
}

// response reads the upstream's answer to req (1xx answers passed on) and
// streams it back; keep says both sides may go on.
func (r *brokerRelay) response(req *http.Request, inj brokerInjection) (keep bool, err error) {
	for {
		r.uin.n = brokerMaxHeader + brokerBufSize
		resp, err := http.ReadResponse(r.ur, req)
		over := r.uin.n <= 0
		r.uin.n = -1
		if err != nil {
			msg := "upstream " + r.host + " sent no valid response"
			if over {
				msg = "upstream " + r.host + " sent headers over 64 KiB"
			}
			r.reply(http.StatusBadGateway, "error", msg, true)
			return false, fmt.Errorf("broker read response from %s: %w", r.host, err)
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			r.reply(http.StatusBadGateway, "error", "upstream "+r.host+" switched protocols", true)
			return false, errors.New("broker: upstream switched protocols")
		}
		if resp.StatusCode >= 200 {
			return r.stream(req, resp, inj)
		}
		brokerDropHop(resp.Header)
		r.writeHead(resp, inj)
		r.cw.WriteString("\r\n")
		if err := r.cw.Flush(); err != nil {
			return false, err
		}
	}
}

// stream writes resp back to the sandbox.
func (r *brokerRelay) stream(req *http.Request, resp *http.Response, inj brokerInjection) (bool, error) {
	defer resp.Body.Close()
	keep := !resp.Close && !req.Close
	hasBody := req.Method != http.MethodHead && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotModified
	scrub := inj.value != "" && hasBody
	if scrub {
		// Every Content-Encoding line counts: a client decodes them all.
		for _, ce := range resp.Header.Values("Content-Encoding") {
			if ce != "" && !strings.EqualFold(ce, "identity") {
				r.reply(http.StatusBadGateway, "error", "upstream "+r.host+" answered with Content-Encoding "+ce+", which the broker cannot scrub of the secret", true)
				return false, nil
			}
		}
	}
	brokerDropHop(resp.Header)
	chunked := false
	if hasBody {
		resp.Header.Del("Content-Length")
		switch {
		case !scrub && resp.ContentLength >= 0:
			resp.Header.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
		case req.ProtoAtLeast(1, 1):
			chunked = true
		default:
			keep = false // HTTP/1.0: the end of the body is the end of the connection
		}
	}
	r.writeHead(resp, inj)
	if chunked {
		r.cw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if !keep {
		r.cw.WriteString("Connection: close\r\n")
	}
	r.cw.WriteString("\r\n")
	if !hasBody {
		return keep, r.cw.Flush()
	}
	var dst io.Writer = r.cw
	var cw io.WriteCloser
	if chunked {
		cw = httputil.NewChunkedWriter(r.cw)
		dst = cw
	}
	var rep *brokerReplacer
	if scrub {
		rep = &brokerReplacer{w: dst, old: []byte(inj.value), new: []byte(inj.placeholder)}
		dst = rep
	}
	if err := r.copyBody(dst, resp.Body); err != nil {
		return false, err
	}
	if rep != nil {
		if err := rep.Close(); err != nil {
			return false, err
		}
	}
	if cw != nil {
		cw.Close()
		r.cw.WriteString("\r\n")
	}
	return keep, r.cw.Flush()
}

// writeHead writes resp's status line and headers with the value replaced
// by the placeholder.
func (r *brokerRelay) writeHead(resp *http.Response, inj brokerInjection) {
	scrub := func(s string) string {
		if inj.value == "" {
			return s
		}
		return strings.ReplaceAll(s, inj.value, inj.placeholder)
	}
	status := strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode)
	if resp.Status != "" {
		status = resp.Status
	}
	r.cw.WriteString("HTTP/1.1 " + scrub(status) + "\r\n")
	h := make(http.Header, len(resp.Header))
	for k, vs := range resp.Header {
		// ReadResponse canonicalized the name's case: match it in any case.
		if inj.value != "" {
			k = brokerReplaceFold(k, inj.value, inj.placeholder)
		}
		for _, v := range vs {
			h[k] = append(h[k], scrub(v))
		}
	}
	h.Write(r.cw)
}

// copyBody streams src to dst, flushing to the sandbox after each read so
// a streamed answer (server-sent events) is not held back.
func (r *brokerRelay) copyBody(dst io.Writer, src io.Reader) error {
	buf := make([]byte, brokerBufSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
			if r.ur.Buffered() == 0 {
				if werr := r.cw.Flush(); werr != nil {
					return werr
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("broker read body from %s: %w", r.host, err)
		}
	}
}
