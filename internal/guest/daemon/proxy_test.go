package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon/supervise"
)

// seen is what a fake web service reports about a request.
type seen struct {
	Path, RawPath, Query, Host, Origin string
}

// fakeService answers requests with what it saw, and echoes WebSocket
// messages.
func fakeService(t *testing.T) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			c, err := websocket.Accept(w, r, nil)
			if err != nil {
				return
			}
			defer c.CloseNow()
			typ, msg, err := c.Read(r.Context())
			if err == nil {
				_ = c.Write(r.Context(), typ, append([]byte("echo: "), msg...))
			}
			return
		}
		writeJSON(w, http.StatusOK, seen{r.URL.Path, r.URL.RawPath, r.URL.RawQuery, r.Host, r.Header.Get("Origin")})
	}))
	t.Cleanup(ts.Close)
	return ts
}

// proxyGuest serves a guest whose desktop and Jupyter are fake: each
// "service" is a sleep, and the proxy targets are fake HTTP servers. It
// returns an HTTP client that reaches the guest.
func proxyGuest(t *testing.T, jupyter *supervise.Spec) (*http.Client, map[string]*httptest.Server, func() error) {
	t.Helper()
	srv, err := New(Config{Workspace: t.TempDir(), WebBase: "/v1/jobs/j1"})
	if err != nil {
		t.Fatal(err)
	}
	fakes := map[string]*httptest.Server{guest.ServiceDesktop: fakeService(t), guest.ServiceJupyter: fakeService(t)}
	srv.targets = map[string]proxyTarget{
		guest.ServiceDesktop: {addr: fakes[guest.ServiceDesktop].Listener.Addr().String(), prefix: "/"},
		guest.ServiceJupyter: {addr: fakes[guest.ServiceJupyter].Listener.Addr().String(), prefix: "/v1/jobs/j1/jupyter/"},
	}
	if jupyter == nil {
		jupyter = &supervise.Spec{Name: guest.ServiceJupyter, Argv: []string{"sleep", "60"}}
	}
	srv.sup = supervise.New(supervise.Config{LogDir: t.TempDir(), Backoff: time.Millisecond, Poll: time.Millisecond},
		&supervise.Spec{Name: guest.ServiceDesktop, Argv: []string{"sleep", "60"}}, jupyter)
	dir, err := os.MkdirTemp("", "abp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, guest.SocketName)
	l, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	c := guest.NewClient(sock)
	stop := sync.OnceValue(func() error {
		c.Close()
		cancel()
		return <-done
	})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &http.Client{Transport: c.Transport(), CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}, fakes, stop
}

func getSeen(t *testing.T, hc *http.Client, req *http.Request) seen {
	t.Helper()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s seen
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, decode: %v", resp.StatusCode, err)
	}
	return s
}

func TestProxyForwardsToTheService(t *testing.T) {
	hc, fakes, _ := proxyGuest(t, nil)
	jAddr := fakes[guest.ServiceJupyter].Listener.Addr().String()
	req, _ := http.NewRequest(http.MethodGet, "http://guest/proxy/jupyter/api/contents/a%2Fb%20c.ipynb?type=file&x=1", nil)
	req.Header.Set("Origin", "https://agentbox.example:8443")
	got := getSeen(t, hc, req)
	want := seen{Path: "/v1/jobs/j1/jupyter/api/contents/a/b c.ipynb", RawPath: "/v1/jobs/j1/jupyter/api/contents/a%2Fb%20c.ipynb",
		Query: "type=file&x=1", Host: jAddr, Origin: "http://" + jAddr}
	if got != want {
		t.Fatalf("jupyter saw %+v, want %+v", got, want)
	}
	req, _ = http.NewRequest(http.MethodGet, "http://guest/proxy/desktop/core/rfb.js", nil)
	dAddr := fakes[guest.ServiceDesktop].Listener.Addr().String()
	if got := getSeen(t, hc, req); got.Path != "/core/rfb.js" || got.Host != dAddr || got.Origin != "" {
		t.Fatalf("desktop saw %+v", got)
	}
}

func TestProxyRedirectsDesktopRootToNoVNC(t *testing.T) {
	hc, _, _ := proxyGuest(t, nil)
	resp, err := hc.Get("http://guest/proxy/desktop/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := "vnc.html?autoconnect=1&resize=scale&reconnect=1&path=v1/jobs/j1/desktop/websockify"
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != want {
		t.Fatalf("status %d, location %q; want 302 to %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
}

func TestProxyUpgradesWebSockets(t *testing.T) {
	hc, _, _ := proxyGuest(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws://guest/proxy/desktop/websockify", &websocket.DialOptions{
		HTTPClient: hc, HTTPHeader: http.Header{"Origin": {"https://elsewhere.example"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageBinary, []byte("RFB?")); err != nil {
		t.Fatal(err)
	}
	_, msg, err := c.Read(ctx)
	if err != nil || string(msg) != "echo: RFB?" {
		t.Fatalf("read %q, %v", msg, err)
	}
}

func TestProxyErrors(t *testing.T) {
	broken := &supervise.Spec{Name: guest.ServiceJupyter, Argv: []string{"sh", "-c", "echo jupyter: no module named notebook >&2; exit 1"},
		Ready: func(context.Context) error { return errors.New("down") }}
	hc, _, _ := proxyGuest(t, broken)
	for _, tc := range []struct {
		path       string
		status     int
		code, text string
	}{
		{"/proxy/nosuch/x", http.StatusNotFound, guest.CodeNotFound, `no web service "nosuch"`},
		{"/proxy/jupyter/api", http.StatusServiceUnavailable, guest.CodeService, "no module named notebook"},
	} {
		resp, err := hc.Get("http://guest" + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body guest.ErrorBody
		_ = json.Unmarshal(b, &body)
		if resp.StatusCode != tc.status || body.Error == nil || body.Error.Code != tc.code || !strings.Contains(body.Error.Message, tc.text) {
			t.Errorf("%s: status %d, body %s; want %d %s containing %q", tc.path, resp.StatusCode, b, tc.status, tc.code, tc.text)
		}
	}
}

func TestServeShutsDownWithAnOpenWebSocket(t *testing.T) {
	hc, _, stop := proxyGuest(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The fake service keeps this connection open until the client speaks.
	c, _, err := websocket.Dial(ctx, "ws://guest/proxy/jupyter/api/kernels/k/channels", &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Serve did not return while a proxied WebSocket was open")
	}
	if _, _, err := c.Read(ctx); err == nil {
		t.Fatal("the WebSocket survived the guest's shutdown")
	}
}
