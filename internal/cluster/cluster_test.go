package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
	"github.com/agentbox/agentbox/internal/wire"
)

// twoHosts is an API replica ("api-1", running no jobs) and a worker
// ("w-2") running job j1 with a sandbox, which share a store.
type twoHosts struct {
	st       *sqlite.Store
	resolver *Resolver
	worker   string // the worker's internal endpoint, host:port
	hits     *atomic.Int64
}

func newTwoHosts(t *testing.T) twoHosts {
	t.Helper()
	g, hits := standInGuest(t)
	st := openStore(t)
	addr := serveWorker(t, testSecret, hostGuests(map[string]*guest.Client{"j1": g}, "j-gone"))
	register(t, st, "w-2", addr, time.Now())
	runningOn(t, st, "j1", "w-2")
	r := NewResolver(hostGuests(nil), st, "api-1", testSecret, testLog(t))
	return twoHosts{st: st, resolver: r, worker: addr, hits: hits}
}

func TestTunnelCarriesRequestsToTheGuest(t *testing.T) {
	h := newTwoHosts(t)
	g, err := h.resolver.Guest(t.Context(), "j1")
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: g.Transport()}
	req, _ := http.NewRequest(http.MethodGet, "http://guest/proxy/jupyter/api/contents/a%2Fb%20c.ipynb?type=file&x=1", nil)
	req.Host = "agentbox.example:8443"
	req.Header.Set("X-Forwarded-Proto", "https")
	want := seen{Method: http.MethodGet, Path: "/proxy/jupyter/api/contents/a/b c.ipynb", RawPath: "/proxy/jupyter/api/contents/a%2Fb%20c.ipynb",
		Query: "type=file&x=1", Host: "agentbox.example:8443", ForwardedProto: "https"}
	if got := get(t, hc, req); got != want {
		t.Fatalf("guest saw %+v, want %+v", got, want)
	}
	req, _ = http.NewRequest(http.MethodPost, "http://guest/proxy/jupyter/api/sessions", strings.NewReader(`{"k":1}`))
	if got := get(t, hc, req); got.Method != http.MethodPost || got.Body != `{"k":1}` || got.Auth != "" || got.GuestSecret != "" {
		t.Fatalf("guest saw %+v; want the POST's body without credentials", got)
	}
}

func TestTunnelCarriesWebSockets(t *testing.T) {
	h := newTwoHosts(t)
	api := apiProxy(t, h.resolver)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(api, "http")+"/v1/jobs/j1/desktop/websockify", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	for _, m := range []string{"RFB 003.008", "second"} {
		if err := c.Write(ctx, websocket.MessageBinary, []byte(m)); err != nil {
			t.Fatal(err)
		}
		if _, got, err := c.Read(ctx); err != nil || string(got) != "echo: "+m {
			t.Fatalf("read %q, %v; want the echo of %q", got, err, m)
		}
	}
	c.Close(websocket.StatusNormalClosure, "")
}

func TestHandlerRefuses(t *testing.T) {
	h := newTwoHosts(t)
	closed := serveWorker(t, "", hostGuests(nil))
	for _, tc := range []struct {
		name, addr, auth, path string
		status                 int
		code                   string
	}{
		{"no secret sent", h.worker, "", "/internal/v1/jobs/j1/guest/proxy/desktop/", http.StatusUnauthorized, wire.CodeUnauthorized},
		{"wrong secret", h.worker, bearer("nope"), "/internal/v1/jobs/j1/guest/proxy/desktop/", http.StatusUnauthorized, wire.CodeUnauthorized},
		{"secret as a prefix", h.worker, bearer(testSecret + "x"), "/internal/v1/jobs/j1/guest/proxy/desktop/", http.StatusUnauthorized, wire.CodeUnauthorized},
		{"secret not as bearer", h.worker, testSecret, "/internal/v1/jobs/j1/guest/proxy/desktop/", http.StatusUnauthorized, wire.CodeUnauthorized},
		{"worker without a secret", closed, bearer(""), "/internal/v1/jobs/j1/guest/proxy/desktop/", http.StatusUnauthorized, wire.CodeUnauthorized},
		{"unknown route", h.worker, bearer(testSecret), "/internal/v1/workers", http.StatusNotFound, wire.CodeNotFound},
		{"guest's exec", h.worker, bearer(testSecret), "/internal/v1/jobs/j1/guest/exec", http.StatusForbidden, wire.CodeForbidden},
		{"guest's files", h.worker, bearer(testSecret), "/internal/v1/jobs/j1/guest/files/read?path=a", http.StatusForbidden, wire.CodeForbidden},
		{"dot segments", h.worker, bearer(testSecret), "/internal/v1/jobs/j1/guest/proxy/%2e%2e/files/read?path=a", http.StatusForbidden, wire.CodeForbidden},
		{"encoded slash", h.worker, bearer(testSecret), "/internal/v1/jobs/j1/guest/proxy%2Fdesktop/", http.StatusForbidden, wire.CodeForbidden},
		{"unknown job", h.worker, bearer(testSecret), "/internal/v1/jobs/nosuch/guest/proxy/desktop/", http.StatusNotFound, wire.CodeNotFound},
		{"job without sandbox", h.worker, bearer(testSecret), "/internal/v1/jobs/j-gone/guest/proxy/desktop/", http.StatusConflict, wire.CodeNoSandbox},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, "http://"+tc.addr+tc.path, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body wire.ErrorResponse
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || json.Unmarshal(b, &body) != nil || body.Error.Code != tc.code {
				t.Fatalf("status %d, body %s; want %d %s", resp.StatusCode, b, tc.status, tc.code)
			}
		})
	}
	if n := h.hits.Load(); n != 0 {
		t.Fatalf("%d refused requests reached the guest", n)
	}
}

func TestHealthzNeedsNoSecret(t *testing.T) {
	resp, err := http.Get("http://" + serveWorker(t, "", hostGuests(nil)) + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: status %d", resp.StatusCode)
	}
}

func TestResolverErrors(t *testing.T) {
	h := newTwoHosts(t)
	st := h.st
	runningOn(t, st, "j-lost", "w-unknown")
	register(t, st, "w-silent", h.worker, time.Now().Add(-time.Hour))
	runningOn(t, st, "j-silent", "w-silent")
	register(t, st, "w-noaddr", "", time.Now())
	runningOn(t, st, "j-noaddr", "w-noaddr")
	for _, tc := range []struct {
		name, job string
		r         *Resolver
		want      error
	}{
		{"unknown job", "nosuch", h.resolver, store.ErrNotFound},
		{"unregistered worker", "j-lost", h.resolver, jobs.ErrNoSandbox},
		{"silent worker", "j-silent", h.resolver, jobs.ErrNoSandbox},
		{"worker without endpoint", "j-noaddr", h.resolver, jobs.ErrNoSandbox},
		{"no cluster secret here", "j1", NewResolver(hostGuests(nil), st, "api-1", "", nil), jobs.ErrNoSandbox},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.r.Guest(t.Context(), tc.job); !errors.Is(err, tc.want) {
				t.Fatalf("Guest(%s) = %v; want %v", tc.job, err, tc.want)
			}
		})
	}
}

func TestResolverUsesTheLocalGuestForItsOwnJobs(t *testing.T) {
	g, hits := standInGuest(t)
	st := openStore(t)
	runningOn(t, st, "mine", "w-1")
	r := NewResolver(hostGuests(map[string]*guest.Client{"mine": g}), st, "w-1", testSecret, testLog(t))
	got, err := r.Guest(t.Context(), "mine")
	if err != nil || got != g {
		t.Fatalf("Guest(mine) = %p, %v; want the local client %p", got, err, g)
	}
	if hits.Load() != 0 {
		t.Fatal("resolving reached the guest")
	}
}

// TestTunnelErrors covers what goes wrong after the worker was found: it
// does not answer, it no longer has the job's sandbox, its secret differs.
func TestTunnelErrors(t *testing.T) {
	h := newTwoHosts(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close()
	register(t, h.st, "w-down", down, time.Now())
	runningOn(t, h.st, "j-down", "w-down")
	runningOn(t, h.st, "j-gone", "w-2") // the worker's own record says it has no sandbox
	other := NewResolver(hostGuests(nil), h.st, "api-1", "another secret", nil)
	for _, tc := range []struct {
		name, job    string
		r            *Resolver
		noSandbox    bool
		msgSubstring string
	}{
		{"worker down", "j-down", h.resolver, false, "reach worker w-down"},
		{"sandbox gone on the worker", "j-gone", h.resolver, true, "job j-gone is pending"},
		{"secrets differ", "j1", other, false, "refused the cluster secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := tc.r.Guest(t.Context(), tc.job)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodGet, "http://guest/proxy/desktop/", nil)
			resp, err := g.Transport().RoundTrip(req)
			if err == nil {
				resp.Body.Close()
				t.Fatalf("status %d; want an error", resp.StatusCode)
			}
			if errors.Is(err, jobs.ErrNoSandbox) != tc.noSandbox || !strings.Contains(err.Error(), tc.msgSubstring) {
				t.Fatalf("error %q: want ErrNoSandbox %v, containing %q", err, tc.noSandbox, tc.msgSubstring)
			}
		})
	}
}
