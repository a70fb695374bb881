package daemon

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
)

// proxyTarget is where a proxied web service listens, and the path prefix
// its requests get.
type proxyTarget struct {
	addr   string // host:port on loopback
	prefix string // begins and ends with "/"
}

// newProxyTransport connects to the services on loopback, never through an
// HTTP proxy the environment may name.
func newProxyTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// proxy serves /proxy/{service}/{path...}: it starts the service if needed
// and forwards the request, WebSocket upgrades included, to it. The host
// serves the same paths under its WebBase; the services are configured for
// that base, so their pages' links work through both proxies.
func (s *Server) proxy(w http.ResponseWriter, r *http.Request) {
	s.proxies.Add(1)
	defer s.proxies.Done()
	name := r.PathValue("service")
	t, ok := s.targets[name]
	if !ok {
		s.writeError(w, guest.Errorf(guest.CodeNotFound, "no web service %q; there are %q and %q", name, guest.ServiceDesktop, guest.ServiceJupyter))
		return
	}
	rest := proxyRest(r.URL)
	if name == guest.ServiceDesktop && rest == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		s.redirectToNoVNC(w)
		return
	}
	if err := s.sup.Ensure(r.Context(), name); err != nil {
		s.writeError(w, err)
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { rewriteTo(pr, t, rest) },
		Transport:     s.tr,
		FlushInterval: -1, // event streams and long polls pass at once
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			s.writeError(w, guest.Errorf(guest.CodeService, "proxy to %s: %v", name, err))
		},
	}
	tw := &trackedWriter{ResponseWriter: w, s: s}
	defer tw.untrack()
	rp.ServeHTTP(tw, r)
}

// trackedWriter records the connection a WebSocket upgrade takes over, so
// Serve can close it: http.Server's shutdown forgets hijacked connections.
type trackedWriter struct {
	http.ResponseWriter
	s    *Server
	conn net.Conn
}

func (w *trackedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.conn = c
		w.s.trackUpgraded(c)
	}
	return c, rw, err
}

// Unwrap lets http.ResponseController reach Flush and the like.
func (w *trackedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *trackedWriter) untrack() {
	if w.conn == nil {
		return
	}
	w.s.mu.Lock()
	delete(w.s.upgraded, w.conn)
	w.s.mu.Unlock()
}

// closeUpgraded ends the proxied WebSocket connections and the egress
// relays, and any upgraded later (trackUpgraded): http.Server's shutdown
// may return while a handler is between its hijack and its tracking.
func (s *Server) closeUpgraded() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.upgradedClosed = true
	for c := range s.upgraded {
		c.Close()
	}
}

// proxyRest is the still-escaped path after /proxy/{service}/.
func proxyRest(u *url.URL) string {
	p := strings.TrimPrefix(u.EscapedPath(), "/proxy/")
	if _, rest, ok := strings.Cut(p, "/"); ok {
		return rest
	}
	return ""
}

// rewriteTo aims the outgoing request at t. Host, and Origin when sent, are
// set to the service's own address: Jupyter and websockify then see a
// same-origin local request (the host checked the browser's origin).
func rewriteTo(pr *httputil.ProxyRequest, t proxyTarget, rest string) {
	u := pr.Out.URL
	u.Scheme, u.Host = "http", t.addr
	raw := t.prefix + rest
	if p, err := url.PathUnescape(raw); err == nil {
		u.Path, u.RawPath = p, raw
	} else {
		u.Path, u.RawPath = raw, ""
	}
	pr.Out.Host = t.addr
	if pr.Out.Header.Get("Origin") != "" {
		pr.Out.Header.Set("Origin", "http://"+t.addr)
	}
}

// redirectToNoVNC sends a browser at the desktop's root to noVNC's page,
// told to connect back through the same path. The location is relative:
// the host serves this under its own prefix.
func (s *Server) redirectToNoVNC(w http.ResponseWriter) {
	path := strings.TrimPrefix(s.cfg.WebBase+"/desktop/websockify", "/")
	w.Header().Set("Location", "vnc.html?autoconnect=1&resize=scale&reconnect=1&path="+path)
	w.WriteHeader(http.StatusFound)
}
