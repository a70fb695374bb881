package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/internal/wire"
)

// seen is what the fake guest received.
type seen struct {
	Method, Path, RawPath, Query, Host string
	Header                             http.Header
}

// fakeGuest serves /proxy/... on a unix socket like the guest does: it
// echoes each request as JSON, echoes WebSocket messages on
// /proxy/desktop/websockify, and has a few special paths.
func fakeGuest(t *testing.T) (*guest.Client, *[]seen) {
	t.Helper()
	dir, err := os.MkdirTemp("", "abX") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "g.sock"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var log []seen
	mux := http.NewServeMux()
	mux.HandleFunc("/proxy/desktop/websockify", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, msg, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, append([]byte("echo:"), msg...)); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/proxy/jupyter/cookies", func(w http.ResponseWriter, r *http.Request) {
		for _, c := range []string{"_xsrf=a; Path=/", "own=b; Path=/v1/jobs/other/", "agentbox_view=forged; Path=/",
			"dom=c; Domain=example.com; Path=/v1/jobs/job_x/jupyter/"} {
			w.Header().Add("Set-Cookie", c)
		}
		w.Header().Set("Strict-Transport-Security", "max-age=31536000")
		w.Header().Set("Service-Worker-Allowed", "/")
		w.Header().Set("Clear-Site-Data", `"*"`)
		w.Header().Set("Cross-Origin-Opener-Policy", "same-origin") // the UI's: a window it opens on one would stay scriptable
		for _, h := range originWideHeaders {
			w.Header().Set(h, "1")
		}
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("ETag", `"v1"`)
	})
	mux.HandleFunc("/proxy/jupyter/bigheaders", func(w http.ResponseWriter, r *http.Request) {
		for i := range 100 {
			w.Header().Set(fmt.Sprintf("X-Big-%d", i), strings.Repeat("a", 1<<10))
		}
	})
	mux.HandleFunc("/proxy/jupyter/redirect", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", r.URL.Query().Get("to"))
		w.WriteHeader(http.StatusFound)
	})
	mux.HandleFunc("/proxy/desktop/broken", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":{"code":"service","message":"desktop: Xvfb exited: no screens"}}`)
	})
	mux.HandleFunc("/proxy/jupyter/busy", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"message":"kernel busy"}`)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		log = append(log, seen{r.Method, r.URL.Path, r.URL.EscapedPath(), r.URL.RawQuery, r.Host, r.Header.Clone()})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(seen{r.Method, r.URL.Path, r.URL.EscapedPath(), r.URL.RawQuery, r.Host, r.Header})
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	c := guest.NewClient(l.Addr().String())
	t.Cleanup(c.Close)
	return c, &log
}

// sandboxService is the real jobs.Service with a fake sandbox: running
// jobs reach the fake guest, others have none, as jobs.Service.Guest says.
type sandboxService struct {
	*jobs.Service
	g *guest.Client
}

func (s sandboxService) Guest(ctx context.Context, id string) (*guest.Client, error) {
	j, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if j.Status != store.StatusRunning {
		return nil, fmt.Errorf("%w: job %s is %s", jobs.ErrNoSandbox, id, j.Status)
	}
	return s.g, nil
}

// clock is a settable time for the server.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// proxyEnv is an API server whose running jobs have the fake guest.
type proxyEnv struct {
	*apitest.Env
	api   *apitest.Env
	seen  *[]seen
	clock *clock
	logs  *testenv.Buffer
	srv   *httptest.Server
	// restart replaces the API server with a new one on the same config,
	// service and address, as a restarted process.
	restart func()
}

func newProxyEnv(t *testing.T, cfg api.Config, mod ...func(*http.Server)) *proxyEnv {
	t.Helper()
	base := apitest.New(t, api.Config{})
	g, log := fakeGuest(t)
	c := &clock{now: time.Now()}
	cfg.Now = c.Now
	if cfg.Tokens == nil && !cfg.NoAuth {
		cfg.Tokens = []string{apitest.Token}
	}
	logs := &testenv.Buffer{}
	var h atomic.Pointer[http.Handler]
	start := func() {
		handler := api.New(cfg, sandboxService{base.Svc, g}, nil, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		h.Store(&handler)
	}
	start()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*h.Load()).ServeHTTP(w, r) }))
	for _, m := range mod {
		m(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return &proxyEnv{Env: base, api: envFor(srv), seen: log, clock: c, logs: logs, srv: srv, restart: start}
}

// running submits a job and marks it running.
func (e *proxyEnv) running() string {
	id := e.Submit("x").ID
	e.Start(id)
	return id
}

// links asks for a job's viewer links.
func (e *proxyEnv) links(t *testing.T, id string) wire.ViewerLinks {
	t.Helper()
	resp, b := do(t, e.api, req{method: "POST", path: "/v1/jobs/" + id + "/viewer"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("viewer: %d %s", resp.StatusCode, b)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("viewer Cache-Control %q", cc)
	}
	return decode[wire.ViewerLinks](t, b)
}

// get sends a GET without following redirects.
func (e *proxyEnv) get(t *testing.T, path string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	return do(t, e.api, req{method: "GET", path: path, header: hdr, noAuth: true})
}

// lastSeen is the last request the fake guest received.
func (e *proxyEnv) lastSeen(t *testing.T) seen {
	t.Helper()
	if len(*e.seen) == 0 {
		t.Fatal("the guest received nothing")
	}
	return (*e.seen)[len(*e.seen)-1]
}

// signIn trades a fresh desktop ticket for the viewer cookie.
func (e *proxyEnv) signIn(t *testing.T, id string) string {
	t.Helper()
	l := e.links(t, id)
	resp, b := e.get(t, l.DesktopURL, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("ticket: %d %s", resp.StatusCode, b)
	}
	for _, c := range resp.Cookies() {
		if c.Name == api.ViewerCookie {
			return c.Name + "=" + c.Value
		}
	}
	t.Fatalf("no viewer cookie in %v", resp.Header["Set-Cookie"])
	return ""
}

func TestProxyRefusesRequestsWithoutCredentials(t *testing.T) {
	e := newProxyEnv(t, api.Config{})
	id := e.running()
	resp, b := e.get(t, "/v1/jobs/"+id+"/desktop/", nil)
	wantError(t, resp, b, http.StatusUnauthorized, wire.CodeUnauthorized)
	resp, b = e.get(t, "/v1/jobs/"+id+"/jupyter/tree", map[string]string{"Accept": "text/html,*/*"})
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(b), "agentbox view "+id) {
		t.Errorf("browser: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	// Unknown jobs look the same without credentials.
	resp, b = e.get(t, "/v1/jobs/job_nope/desktop/", nil)
	wantError(t, resp, b, http.StatusUnauthorized, wire.CodeUnauthorized)
	if len(*e.seen) != 0 {
		t.Errorf("the guest was reached: %+v", *e.seen)
	}
}

func TestProxyWithBearerStripsCredentials(t *testing.T) {
	e := newProxyEnv(t, api.Config{})
	id := e.running()
	resp, b := do(t, e.api, req{method: "POST", path: "/v1/jobs/" + id + "/jupyter/api/contents/a%20b%2Fc.ipynb?x=1&ticket=zz&y=%20",
		body: `{"k":1}`, header: map[string]string{"Cookie": "_xsrf=abc; agentbox_view=v; Agentbox_session=s; _oauth2_proxy=sess; username-x=u",
			"X-Forwarded-Access-Token": "idp-token", "Cf-Access-Jwt-Assertion": "jwt", "X-Xsrftoken": "abc"}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	got := e.lastSeen(t)
	if got.Method != "POST" || got.Path != "/proxy/jupyter/api/contents/a b/c.ipynb" ||
		got.RawPath != "/proxy/jupyter/api/contents/a%20b%2Fc.ipynb" || got.Query != "x=1&y=%20" {
		t.Errorf("forwarded %+v", got)
	}
	if a := got.Header.Get("Authorization"); a != "" {
		t.Errorf("Authorization reached the sandbox: %q", a)
	}
	if c := got.Header.Get("Cookie"); c != "_xsrf=abc; username-x=u" {
		t.Errorf("Cookie forwarded as %q, want only Jupyter's own", c)
	}
	// An auth proxy in front of the API may add identity headers: they stay behind.
	for _, h := range []string{"X-Forwarded-Access-Token", "Cf-Access-Jwt-Assertion"} {
		if v := got.Header.Get(h); v != "" {
			t.Errorf("%s reached the sandbox: %q", h, v)
		}
	}
	if got.Header.Get("X-Xsrftoken") != "abc" {
		t.Errorf("Jupyter's XSRF header was dropped")
	}
	if u, _ := url.Parse(e.api.URL); got.Host != u.Host {
		t.Errorf("Host %q, want the browser's %q", got.Host, u.Host)
	}
	if fa := resp.Header.Get("Content-Security-Policy"); fa != "frame-ancestors 'self'" {
		t.Errorf("CSP %q", fa)
	}
}

func TestViewerLinkSetsCookieAndRedirects(t *testing.T) {
	e := newProxyEnv(t, api.Config{})
	id := e.running()
	l := e.links(t, id)
	if !strings.HasPrefix(l.DesktopURL, "/v1/jobs/"+id+"/desktop/?ticket=") || !strings.HasPrefix(l.JupyterURL, "/v1/jobs/"+id+"/jupyter/?ticket=") {
		t.Fatalf("links %+v", l)
	}
	if d := time.Until(l.ExpiresAt); d > time.Minute+time.Second || d < 50*time.Second {
		t.Errorf("expires in %v", d)
	}
	resp, _ := e.get(t, l.JupyterURL+"&tab=1", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/v1/jobs/"+id+"/jupyter/?tab=1" {
		t.Fatalf("ticket: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v", resp.Header["Set-Cookie"])
	}
	c := cookies[0]
	if c.Name != api.ViewerCookie || c.Path != "/v1/jobs/"+id+"/" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure ||
		c.MaxAge != int(api.ViewerCookieTTL/time.Second) {
		t.Errorf("cookie %+v", c)
	}
	if len(*e.seen) != 0 {
		t.Errorf("the ticket request reached the guest: %+v", *e.seen)
	}
	cookie := map[string]string{"Cookie": c.Name + "=" + c.Value}
	for _, p := range []string{"/jupyter/?tab=1", "/desktop/vnc.html"} {
		resp, b := e.get(t, "/v1/jobs/"+id+p, cookie)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s with cookie: %d %s", p, resp.StatusCode, b)
		}
		if got := e.lastSeen(t); got.Header.Get("Cookie") != "" {
			t.Errorf("cookie reached the sandbox: %q", got.Header.Get("Cookie"))
		}
	}
	// The same link again: used.
	resp, b := e.get(t, l.JupyterURL, nil)
	wantError(t, resp, b, http.StatusUnauthorized, wire.CodeUnauthorized)
	// With the cookie, a used link just loses its ticket.
	resp, _ = e.get(t, l.JupyterURL, cookie)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 0 {
		t.Errorf("used ticket with a cookie: %d %v", resp.StatusCode, resp.Header["Set-Cookie"])
	}
	// The cookie does nothing on the rest of the API.
	for _, p := range []string{"", "/events", "/artifacts.zip", "/files/a"} {
		resp, b := e.get(t, "/v1/jobs/"+id+p, cookie)
		wantError(t, resp, b, http.StatusUnauthorized, wire.CodeUnauthorized)
	}
	resp, b = do(t, e.api, req{method: "POST", path: "/v1/jobs/" + id + "/cancel", noAuth: true, header: cookie})
	wantError(t, resp, b, http.StatusUnauthorized, wire.CodeUnauthorized)
	if strings.Contains(e.logs.String(), strings.SplitN(l.JupyterURL, "ticket=", 2)[1]) {
		t.Errorf("a ticket is in the server log:\n%s", e.logs.String())
	}
}

func TestViewerCredentialsAreChecked(t *testing.T) {
	e := newProxyEnv(t, api.Config{})
	a, b := e.running(), e.running()
	cookieA := e.signIn(t, a)
	tamper := func(s string) string {
		i := len(s) - 5
		c := byte('A')
		if s[i] == 'A' {
			c = 'B'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	ticketB := strings.SplitN(e.links(t, b).DesktopURL, "ticket=", 2)[1]
	tests := []struct {
		name, path string
		hdr        map[string]string
	}{
		{"cookie of another job", "/v1/jobs/" + b + "/desktop/", map[string]string{"Cookie": cookieA}},
		{"ticket of another job", "/v1/jobs/" + a + "/desktop/?ticket=" + ticketB, nil},
		{"tampered ticket", "/v1/jobs/" + b + "/desktop/?ticket=" + tamper(ticketB), nil},
		{"tampered cookie", "/v1/jobs/" + a + "/desktop/", map[string]string{"Cookie": tamper(cookieA)}},
		{"ticket as cookie", "/v1/jobs/" + b + "/desktop/", map[string]string{"Cookie": api.ViewerCookie + "=" + ticketB}},
		{"cookie as ticket", "/v1/jobs/" + a + "/desktop/?ticket=" + strings.TrimPrefix(cookieA, api.ViewerCookie+"="), nil},
		{"API token in ?token=", "/v1/jobs/" + a + "/desktop/?token=" + apitest.Token, nil},
		{"API token in ?access_token=", "/v1/jobs/" + a + "/desktop/?access_token=" + apitest.Token, nil},
		{"garbage cookie", "/v1/jobs/" + a + "/desktop/", map[string]string{"Cookie": api.ViewerCookie + "=x.y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := e.get(t, tt.path, tt.hdr)
			wantError(t, resp, body, http.StatusUnauthorized, wire.CodeUnauthorized)
		})
	}
	if len(*e.seen) != 0 {
		t.Errorf("the guest was reached: %+v", *e.seen)
	}
	// B's ticket was not spent by the failed attempts on A's path.
	if resp, _ := e.get(t, "/v1/jobs/"+b+"/desktop/?ticket="+ticketB, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("B's own ticket: %d", resp.StatusCode)
	}
	// A bogus cookie of the same name does not hide the real one.
	resp, _ := e.get(t, "/v1/jobs/"+a+"/desktop/", map[string]string{"Cookie": api.ViewerCookie + "=bogus; " + cookieA})
	if resp.StatusCode != http.StatusOK {
		t.Errorf("real cookie after a bogus one: %d", resp.StatusCode)
	}
	// An authenticated URL holding the API token is refused, not passed on.
	n := len(*e.seen)
	resp, body := e.get(t, "/v1/jobs/"+a+"/desktop/?token="+apitest.Token, map[string]string{"Cookie": cookieA})
	wantError(t, resp, body, http.StatusBadRequest, wire.CodeBadRequest)
	if len(*e.seen) != n {
		t.Error("a URL with the API token reached the sandbox")
	}
}

func TestViewerTicketsAndCookiesExpire(t *testing.T) {
	e := newProxyEnv(t, api.Config{})
	id := e.running()
	l := e.links(t, id)
	e.clock.add(api.TicketTTL + time.Second)
	resp, b := e.get(t, l.DesktopURL, nil)
	wantError(t, resp, b, http.StatusUnauthorized, wire.CodeUnauthorized)
	cookie := e.signIn(t, id)
	e.clock.add(api.ViewerCookieTTL - time.Minute)
	if resp, _ := e.get(t, "/v1/jobs/"+id+"/desktop/", map[string]string{"Cookie": cookie}); resp.StatusCode != http.StatusOK {
		t.Errorf("cookie before expiry: %d", resp.StatusCode)
	}
	e.clock.add(2 * time.Minute)
	resp, b = e.get(t, "/v1/jobs/"+id+"/desktop/", map[string]string{"Cookie": cookie})
	wantError(t, resp, b, http.StatusUnauthorized, wire.CodeUnauthorized)
}

// dialWS opens a WebSocket through the proxy and checks the echo.
func dialWS(t *testing.T, e *proxyEnv, id string, hdr http.Header) (*http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(e.api.URL, "http") + "/v1/jobs/" + id + "/desktop/websockify"
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: hdr, Host: hdr.Get("Host")})
	if err != nil {
		return resp, err
	}
	defer c.CloseNow()
	for _, msg := range []string{"hello", "again"} {
		time.Sleep(700 * time.Millisecond) // outlasts the server's timeouts in TestProxyWebSocket
		if err := c.Write(ctx, websocket.MessageBinary, []byte(msg)); err != nil {
			t.Fatalf("write: %v", err)
		}
		_, got, err := c.Read(ctx)
		if err != nil || string(got) != "echo:"+msg {
			t.Fatalf("read %q %v", got, err)
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
	return resp, nil
}

// With a key of its own, a restarted server honors the viewer cookies of
// the one before, but not its tickets: which of those were redeemed was
// known to the old process only. Without one, nothing survives.
func TestViewerCookiesSurviveRestartWithKey(t *testing.T) {
	e := newProxyEnv(t, api.Config{ViewerKey: []byte("0123456789abcdef0123456789abcdef")})
	id := e.running()
	cookie := e.signIn(t, id)
	unused := e.links(t, id)
	e.clock.add(300 * time.Millisecond) // a restart within the second the ticket was issued
	e.restart()
	if resp, b := e.get(t, "/v1/jobs/"+id+"/desktop/", map[string]string{"Cookie": cookie}); resp.StatusCode != http.StatusOK {
		t.Errorf("cookie after restart: %d %s", resp.StatusCode, b)
	}
	resp, b := e.get(t, unused.DesktopURL, nil)
	wantError(t, resp, b, http.StatusUnauthorized, wire.CodeUnauthorized)
	if fresh := e.signIn(t, id); fresh == "" {
		t.Error("no cookie for a ticket issued after the restart")
	}

	e = newProxyEnv(t, api.Config{})
	id = e.running()
	cookie = e.signIn(t, id)
	e.restart()
	resp, b = e.get(t, "/v1/jobs/"+id+"/desktop/", map[string]string{"Cookie": cookie})
	wantError(t, resp, b, http.StatusUnauthorized, wire.CodeUnauthorized)
}

func TestProxyWebSocket(t *testing.T) {
	// Server timeouts shorter than the session must not cut it.
	e := newProxyEnv(t, api.Config{}, func(s *http.Server) { s.ReadTimeout, s.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond })
	id := e.running()
	cookie := e.signIn(t, id)
	if _, err := dialWS(t, e, id, http.Header{"Cookie": {cookie}, "Origin": {e.api.URL}}); err != nil {
		t.Fatalf("same origin: %v", err)
	}
	if _, err := dialWS(t, e, id, http.Header{"Cookie": {cookie}}); err != nil {
		t.Fatalf("no origin: %v", err)
	}
	if _, err := dialWS(t, e, id, http.Header{"Authorization": {"Bearer " + apitest.Token}}); err != nil {
		t.Fatalf("bearer: %v", err)
	}
	for _, origin := range []string{"http://evil.example", "null"} {
		resp, err := dialWS(t, e, id, http.Header{"Cookie": {cookie}, "Origin": {origin}})
		if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("origin %s: %v %v", origin, resp, err)
		}
	}
	resp, err := dialWS(t, e, id, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no credentials: %v %v", resp, err)
	}
	// A cookie-authenticated request from a page of another origin.
	r, b := do(t, e.api, req{method: "POST", path: "/v1/jobs/" + id + "/jupyter/api/x", noAuth: true,
		header: map[string]string{"Cookie": cookie, "Origin": "http://evil.example"}})
	wantError(t, r, b, http.StatusForbidden, wire.CodeForbidden)
}

func TestProxyErrors(t *testing.T) {
	e := newProxyEnv(t, api.Config{})
	pending := e.Submit("x").ID
	ended := e.running()
	e.Finish(ended, store.StatusComplete, "")
	id := e.running()
	for _, tt := range []struct {
		path   string
		status int
		code   string
		msg    string
	}{
		{"/v1/jobs/" + pending + "/desktop/", 409, wire.CodeNoSandbox, "pending"},
		{"/v1/jobs/" + ended + "/jupyter/", 409, wire.CodeNoSandbox, "complete"},
		{"/v1/jobs/job_nope/desktop/", 404, wire.CodeNotFound, "no such job"},
		{"/v1/jobs/" + id + "/desktop/broken", 503, wire.CodeUnavailable, "Xvfb exited: no screens"},
	} {
		resp, b := do(t, e.api, req{method: "GET", path: tt.path})
		if got := wantError(t, resp, b, tt.status, tt.code); !strings.Contains(got.Message, tt.msg) {
			t.Errorf("%s: message %q, want %q in it", tt.path, got.Message, tt.msg)
		}
	}
	// A 503 of the service itself is passed on as it is.
	resp, b := do(t, e.api, req{method: "GET", path: "/v1/jobs/" + id + "/jupyter/busy"})
	if resp.StatusCode != 503 || string(b) != `{"message":"kernel busy"}` {
		t.Errorf("service's own 503: %d %s", resp.StatusCode, b)
	}
	// The viewer endpoint.
	resp, b = do(t, e.api, req{method: "POST", path: "/v1/jobs/" + ended + "/viewer"})
	wantError(t, resp, b, http.StatusConflict, wire.CodeNoSandbox)
	resp, b = do(t, e.api, req{method: "POST", path: "/v1/jobs/job_nope/viewer"})
	wantError(t, resp, b, http.StatusNotFound, wire.CodeNotFound)
	resp, b = do(t, e.api, req{method: "POST", path: "/v1/jobs/" + id + "/viewer", noAuth: true})
	wantError(t, resp, b, http.StatusUnauthorized, wire.CodeUnauthorized)
	e.links(t, pending) // a pending job gets links: it may start by the time they are opened
}

func TestProxyUnreachableGuest(t *testing.T) {
	base := apitest.New(t, api.Config{})
	g := guest.NewClient(filepath.Join(t.TempDir(), "gone.sock"))
	srv := httptest.NewServer(api.New(api.Config{Tokens: []string{apitest.Token}}, sandboxService{base.Svc, g}, nil, nil))
	defer srv.Close()
	id := base.Submit("x").ID
	base.Start(id)
	resp, b := do(t, envFor(srv), req{method: "GET", path: "/v1/jobs/" + id + "/desktop/"})
	if got := wantError(t, resp, b, http.StatusBadGateway, wire.CodeBadGateway); strings.Contains(got.Message, "gone.sock") {
		t.Errorf("message leaks the socket path: %q", got.Message)
	}
}

func TestProxyConfinesSandboxResponses(t *testing.T) {
	e := newProxyEnv(t, api.Config{})
	id := e.running()
	resp, b := do(t, e.api, req{method: "GET", path: "/v1/jobs/" + id + "/jupyter/cookies"})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	for _, h := range append([]string{"Strict-Transport-Security", "Service-Worker-Allowed", "Clear-Site-Data", "Cross-Origin-Opener-Policy"}, originWideHeaders...) {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("%s passed on: %q", h, v)
		}
	}
	if resp.Header.Get("Content-Type") != "text/html" || resp.Header.Get("ETag") != `"v1"` {
		t.Errorf("a page's own headers were dropped: %v", resp.Header)
	}
	got := map[string]*http.Cookie{}
	for _, c := range resp.Cookies() {
		got[c.Name] = c
	}
	scope := "/v1/jobs/" + id + "/"
	if _, ok := got[api.ViewerCookie]; ok {
		t.Error("the sandbox set agentbox's cookie")
	}
	for _, name := range []string{"_xsrf", "own", "dom"} {
		c, ok := got[name]
		if !ok || !strings.HasPrefix(c.Path, scope) || c.Domain != "" {
			t.Errorf("cookie %s = %+v, want it under %s without Domain", name, c, scope)
		}
	}
}

// originWideHeaders act on the whole origin, not the page: the attack
// pass of issue 25 set each through a page in a sandbox.
var originWideHeaders = []string{"NEL", "Report-To", "Reporting-Endpoints", "Refresh", "Accept-CH", "Critical-CH",
	"Set-Login", "Origin-Agent-Cluster", "Access-Control-Allow-Origin", "Access-Control-Allow-Credentials",
	"Access-Control-Allow-Headers", "Access-Control-Allow-Methods", "WWW-Authenticate", "X-Anything-New"}

// TestProxyConfinesRedirects: a sandbox's redirect stays within the job's
// paths on the host asked for; anything else loses its Location.
func TestProxyConfinesRedirects(t *testing.T) {
	e := newProxyEnv(t, api.Config{})
	id := e.running()
	scope := "/v1/jobs/" + id + "/"
	for to, want := range map[string]string{
		"tree?x=1":                      scope + "jupyter/tree?x=1",
		scope + "jupyter/lab":           scope + "jupyter/lab",
		"../desktop/vnc.html#a":         scope + "desktop/vnc.html#a",
		"./":                            scope + "jupyter/",
		"https://evil.example/":         "",
		"//evil.example/x":              "",
		`\\evil.example/phish`:          "", // a browser reads \\ as //
		`\/evil.example`:                "",
		`/\evil.example`:                "",
		"\t//evil.example":              "",
		"/v1/jobs":                      "",
		scope + "../job_other/jupyter/": "",
		"../../../../healthz":           "",
		"javascript:alert(1)":           "",
		"http://user@127.0.0.1/x":       "",
	} {
		resp, b := do(t, e.api, req{method: "GET", path: scope + "jupyter/redirect?to=" + url.QueryEscape(to)})
		if resp.StatusCode != http.StatusFound {
			t.Fatalf("%s: %d %s", to, resp.StatusCode, b)
		}
		if got := resp.Header.Get("Location"); got != want {
			t.Errorf("Location %q: passed as %q, want %q", to, got, want)
		}
	}
}

// TestProxyBoundsSandboxHeaders: a sandbox's web service answering with
// more headers than guest.MaxResponseHeaderBytes gets a 502, not the
// host's memory (net/http's default bound is 10 MiB an answer).
func TestProxyBoundsSandboxHeaders(t *testing.T) {
	e := newProxyEnv(t, api.Config{})
	id := e.running()
	resp, b := do(t, e.api, req{method: "GET", path: "/v1/jobs/" + id + "/jupyter/bigheaders"})
	wantError(t, resp, b, http.StatusBadGateway, wire.CodeBadGateway)
}

func TestProxyWithoutAuth(t *testing.T) {
	e := newProxyEnv(t, api.Config{NoAuth: true})
	id := e.running()
	resp, b := e.get(t, "/v1/jobs/"+id+"/desktop/?a=1", nil)
	if resp.StatusCode != 200 || e.lastSeen(t).Query != "a=1" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	resp, b = e.get(t, "/v1/jobs/"+id+"/desktop/", map[string]string{"Host": "evil.example"})
	wantError(t, resp, b, http.StatusForbidden, wire.CodeForbidden)
	// Another local web app cannot drive the views either.
	resp, b = do(t, e.api, req{method: "POST", path: "/v1/jobs/" + id + "/jupyter/api/kernels", noAuth: true,
		header: map[string]string{"Origin": "http://localhost:3000"}})
	wantError(t, resp, b, http.StatusForbidden, wire.CodeForbidden)
	resp, b = do(t, e.api, req{method: "POST", path: "/v1/jobs/" + id + "/jupyter/api/kernels", noAuth: true,
		header: map[string]string{"Origin": e.api.URL}})
	if resp.StatusCode != 200 {
		t.Errorf("same origin: %d %s", resp.StatusCode, b)
	}
}

func TestProxyAddsSlashAndUsesBaseURL(t *testing.T) {
	e := newProxyEnv(t, api.Config{BaseURL: "https://ab.example.com/"})
	id := e.running()
	resp, _ := e.get(t, "/v1/jobs/"+id+"/desktop?ticket=t", nil)
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/v1/jobs/"+id+"/desktop/?ticket=t" {
		t.Errorf("no slash: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	l := e.links(t, id)
	if !strings.HasPrefix(l.DesktopURL, "https://ab.example.com/v1/jobs/"+id+"/desktop/?ticket=") {
		t.Errorf("links %+v", l)
	}
	u, _ := url.Parse(l.DesktopURL)
	resp, _ = e.get(t, u.RequestURI(), nil)
	if c := resp.Cookies(); resp.StatusCode != http.StatusSeeOther || len(c) != 1 || !c[0].Secure {
		t.Errorf("ticket behind an https base URL: %d %v", resp.StatusCode, resp.Header["Set-Cookie"])
	}
	// The public origin is accepted for WebSockets as well as the Host asked for.
	cookie := resp.Cookies()[0]
	if _, err := dialWS(t, e, id, http.Header{"Cookie": {cookie.Name + "=" + cookie.Value}, "Origin": {"https://ab.example.com"}}); err != nil {
		t.Errorf("public origin: %v", err)
	}
}

// With per-job view origins, a job's views, its viewer links and its cookie
// live on the job's own host; that host serves nothing else, and the API's
// host serves the views to bearer-token clients only.
func TestViewHostsPerJob(t *testing.T) {
	e := newProxyEnv(t, api.Config{ViewURL: "https://{job}.view.test"})
	a, b := e.running(), e.running()
	hostA, hostB := strings.ReplaceAll(a, "_", "-")+".view.test", strings.ReplaceAll(b, "_", "-")+".view.test"
	onA := func(extra map[string]string) map[string]string {
		h := map[string]string{"Host": hostA}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	l := e.links(t, a)
	if !strings.HasPrefix(l.DesktopURL, "https://"+hostA+"/v1/jobs/"+a+"/desktop/?ticket=") ||
		!strings.HasPrefix(l.JupyterURL, "https://"+hostA+"/v1/jobs/"+a+"/jupyter/?ticket=") {
		t.Fatalf("links %+v", l)
	}
	ticket := strings.SplitN(l.DesktopURL, "ticket=", 2)[1]

	// A ticket is not redeemed on the API's host, nor on another job's.
	resp, body := e.get(t, "/v1/jobs/"+a+"/desktop/?ticket="+ticket, nil)
	wantError(t, resp, body, http.StatusUnauthorized, wire.CodeUnauthorized)
	resp, body = e.get(t, "/v1/jobs/"+a+"/desktop/?ticket="+ticket, map[string]string{"Host": hostB})
	wantError(t, resp, body, http.StatusNotFound, wire.CodeNotFound)
	// On the job's host it is, once: a host-only, Secure cookie.
	resp, body = e.get(t, "/v1/jobs/"+a+"/desktop/?ticket="+ticket, onA(nil))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/v1/jobs/"+a+"/desktop/" || len(resp.Cookies()) != 1 {
		t.Fatalf("ticket on the job's host: %d %q %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	c := resp.Cookies()[0]
	if c.Domain != "" || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Errorf("cookie %+v", c)
	}
	cookie := c.Name + "=" + c.Value
	if resp, body := e.get(t, "/v1/jobs/"+a+"/desktop/vnc.html", onA(map[string]string{"Cookie": cookie})); resp.StatusCode != http.StatusOK {
		t.Fatalf("cookie on the job's host: %d %s", resp.StatusCode, body)
	}
	if got := e.lastSeen(t); got.Path != "/proxy/desktop/vnc.html" || got.Host != hostA {
		t.Errorf("the guest saw %+v", got)
	}

	for _, tt := range []struct {
		name, path string
		hdr        map[string]string
		status     int
	}{
		{"the cookie on the API's host", "/v1/jobs/" + a + "/desktop/", map[string]string{"Cookie": cookie}, http.StatusUnauthorized},
		{"job A's views on job B's host", "/v1/jobs/" + a + "/desktop/", map[string]string{"Host": hostB, "Cookie": cookie}, http.StatusNotFound},
		{"the API on a view host, with the token", "/v1/jobs", map[string]string{"Host": hostA, "Authorization": "Bearer " + apitest.Token}, http.StatusNotFound},
		{"the viewer route on a view host", "/v1/jobs/" + a + "/events", map[string]string{"Host": hostA, "Cookie": cookie}, http.StatusNotFound},
		{"a view host naming no job", "/v1/jobs/" + a + "/desktop/", map[string]string{"Host": "evil.view.test", "Cookie": cookie}, http.StatusNotFound},
		{"an escaped slash to the API", "/v1/jobs/" + a + "%2Fdesktop", map[string]string{"Host": hostA, "Authorization": "Bearer " + apitest.Token}, http.StatusNotFound},
		{"an escaped slash to the events", "/v1/jobs/" + a + "%2Fdesktop/events", map[string]string{"Host": hostA, "Authorization": "Bearer " + apitest.Token}, http.StatusNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := e.get(t, tt.path, tt.hdr)
			wantError(t, resp, body, tt.status, map[int]string{401: wire.CodeUnauthorized, 404: wire.CodeNotFound}[tt.status])
			if tt.status == http.StatusNotFound && !strings.Contains(string(body), "this host") {
				t.Errorf("not refused by the view host's confinement: %s", body)
			}
		})
	}
	// Jupyter too, with the same cookie; answers can't be loaded by pages
	// of other origins.
	resp, body = e.get(t, "/v1/jobs/"+a+"/jupyter/api", onA(map[string]string{"Cookie": cookie}))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Cross-Origin-Resource-Policy") != "same-origin" {
		t.Errorf("jupyter on the job's host: %d, CORP %q: %s", resp.StatusCode, resp.Header.Get("Cross-Origin-Resource-Policy"), body)
	}
	// Pages of other sites (job B's host is same-site) may link to the view
	// but not load it with the browser's cookie: no Origin is sent with a
	// script or an image, Fetch Metadata is.
	for _, tt := range []struct {
		site, mode, dest string
		status           int
	}{
		{"same-origin", "no-cors", "script", http.StatusOK},
		{"none", "navigate", "document", http.StatusOK},
		{"same-site", "navigate", "document", http.StatusOK},
		{"cross-site", "navigate", "document", http.StatusOK},
		{"same-site", "no-cors", "script", http.StatusForbidden},
		{"cross-site", "no-cors", "image", http.StatusForbidden},
		{"same-site", "navigate", "iframe", http.StatusForbidden},
		{"same-site", "cors", "empty", http.StatusForbidden},
	} {
		resp, body := e.get(t, "/v1/jobs/"+a+"/desktop/vnc.html", onA(map[string]string{"Cookie": cookie,
			"Sec-Fetch-Site": tt.site, "Sec-Fetch-Mode": tt.mode, "Sec-Fetch-Dest": tt.dest}))
		if resp.StatusCode != tt.status {
			t.Errorf("Sec-Fetch-Site %s, mode %s, dest %s: %d, want %d: %s", tt.site, tt.mode, tt.dest, resp.StatusCode, tt.status, body)
		}
	}
	// Programs still reach the views on the API's host with the token.
	if resp, body := do(t, e.api, req{method: "GET", path: "/v1/jobs/" + b + "/jupyter/api"}); resp.StatusCode != http.StatusOK {
		t.Errorf("bearer on the API's host: %d %s", resp.StatusCode, body)
	}
	// The bare view host leads to the desktop.
	if resp, _ := e.get(t, "/", onA(nil)); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/v1/jobs/"+a+"/desktop/" {
		t.Errorf("GET / on the view host: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	// WebSockets: from the job's own origin only.
	if _, err := dialWS(t, e, a, http.Header{"Host": {hostA}, "Cookie": {cookie}, "Origin": {"https://" + hostA}}); err != nil {
		t.Fatalf("same origin: %v", err)
	}
	for _, origin := range []string{"https://" + hostB, e.api.URL, "http://" + hostA} {
		resp, err := dialWS(t, e, a, http.Header{"Host": {hostA}, "Cookie": {cookie}, "Origin": {origin}})
		if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("origin %s: %v %v", origin, resp, err)
		}
	}
}

// Without auth, view hosts under .localhost serve the views to browsers;
// the API's host, to programs only.
func TestViewHostsWithoutAuth(t *testing.T) {
	e := newProxyEnv(t, api.Config{NoAuth: true, ViewURL: "http://{job}.localhost:8080"})
	id := e.running()
	host := strings.ReplaceAll(id, "_", "-") + ".localhost:8080"
	if l := e.links(t, id); !strings.HasPrefix(l.DesktopURL, "http://"+host+"/v1/jobs/"+id+"/desktop/") {
		t.Errorf("links %+v", l)
	}
	page := map[string]string{"Sec-Fetch-Site": "same-origin"}
	resp, body := e.get(t, "/v1/jobs/"+id+"/desktop/vnc.html", map[string]string{"Host": host, "Sec-Fetch-Site": "same-origin"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a page on the view host: %d %s", resp.StatusCode, body)
	}
	resp, body = e.get(t, "/v1/jobs/"+id+"/desktop/vnc.html", page)
	wantError(t, resp, body, http.StatusForbidden, wire.CodeForbidden)
	if resp, body := e.get(t, "/v1/jobs/"+id+"/desktop/vnc.html", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("a program on the API's host: %d %s", resp.StatusCode, body)
	}
	// Another job's page (another *.localhost site), or any web site, gets
	// nothing: not with a script tag, not with a POST.
	other := e.running()
	otherOrigin := "http://" + strings.ReplaceAll(other, "_", "-") + ".localhost:8080"
	resp, body = e.get(t, "/v1/jobs/"+id+"/jupyter/files/x.js", map[string]string{"Host": host,
		"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "script"})
	wantError(t, resp, body, http.StatusForbidden, wire.CodeForbidden)
	resp, body = do(t, e.api, req{method: "POST", path: "/v1/jobs/" + id + "/jupyter/api/kernels", noAuth: true,
		header: map[string]string{"Host": host, "Origin": otherOrigin}})
	wantError(t, resp, body, http.StatusForbidden, wire.CodeForbidden)
	if !api.LocalViewURL("http://{job}.Agentbox.LOCALHOST:8080") || api.LocalViewURL("https://{job}.view.example.com") {
		t.Error("LocalViewURL: want .localhost names, in any case, only")
	}
}

func TestCheckViewURL(t *testing.T) {
	for tmpl, want := range map[string]string{
		"":                                "",
		"https://{job}.view.example.com":  "",
		"http://{job}.localhost:8080":     "",
		"https://{job}.view.example.com/": "",
		"ftp://{job}.example.com":         "scheme",
		"https://view.example.com":        "must start with {job}.",
		"https://x{job}.example.com":      "must start with {job}.",
		"https://{job}.{job}.example.com": "must start with {job}.",
		"https://{job}.example.com/views": "path",
		"https://{job}.example.com?a=1":   "path",
		"https://{job}.127.0.0.1":         "domain",
		"https://{job}.example.com:x":     "invalid port",
	} {
		err := api.CheckViewURL(tmpl)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckViewURL(%q) = %v, want %q", tmpl, err, want)
		}
	}
}
