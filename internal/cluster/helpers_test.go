package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
)

const testSecret = "s3cret-of-the-cluster"

// seen is what the stand-in guest saw of a request.
type seen struct {
	Method, Path, RawPath, Query, Host, Body string
	Auth, GuestSecret, ForwardedProto        string
}

// standInGuest serves, on a unix socket as a sandbox's guest does, a
// recorder of plain requests and a WebSocket echo at
// /proxy/desktop/websockify. It stands in for the guest only; hits counts
// the requests that reached it.
func standInGuest(t *testing.T) (c *guest.Client, hits *atomic.Int64) {
	t.Helper()
	hits = new(atomic.Int64)
	sock := filepath.Join(t.TempDir(), "guest.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/proxy/desktop/websockify" {
			echo(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(seen{Method: r.Method, Path: r.URL.Path, RawPath: r.URL.RawPath, Query: r.URL.RawQuery,
			Host: r.Host, Body: string(b), Auth: r.Header.Get("Authorization"), GuestSecret: r.Header.Get(guest.SecretHeader),
			ForwardedProto: r.Header.Get("X-Forwarded-Proto")})
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	c = guest.NewClient(sock)
	t.Cleanup(c.Close)
	return c, hits
}

// echo answers each WebSocket message with "echo: " and the message.
func echo(w http.ResponseWriter, r *http.Request) {
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
		if err := c.Write(r.Context(), typ, append([]byte("echo: "), msg...)); err != nil {
			return
		}
	}
}

// guestsFunc is a Guests as a function: the jobs.Service of a host.
type guestsFunc func(ctx context.Context, id string) (*guest.Client, error)

func (f guestsFunc) Guest(ctx context.Context, id string) (*guest.Client, error) { return f(ctx, id) }

// hostGuests reaches the given running jobs' guests; any other job in
// pending has no sandbox, and the rest are unknown.
func hostGuests(running map[string]*guest.Client, pending ...string) Guests {
	return guestsFunc(func(_ context.Context, id string) (*guest.Client, error) {
		if g, ok := running[id]; ok {
			return g, nil
		}
		for _, p := range pending {
			if p == id {
				return nil, fmt.Errorf("%w: job %s is pending", jobs.ErrNoSandbox, id)
			}
		}
		return nil, fmt.Errorf("get job %s: %w", id, store.ErrNotFound)
	})
}

func testLog(t *testing.T) *slog.Logger { return slog.New(slog.NewTextHandler(t.Output(), nil)) }

// openStore is a real SQLite store in the test's directory.
func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "agentbox.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// runningOn stores job id as running, its lease held by owner.
func runningOn(t *testing.T, st store.Store, id, owner string) {
	t.Helper()
	now := time.Now().UTC()
	if _, _, err := st.CreateJob(t.Context(), store.Job{ID: id, Task: "t", Status: store.StatusPending, MaxAttempts: 1, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if j, err := st.ClaimJob(t.Context(), owner, time.Minute); err != nil || j.ID != id {
		t.Fatalf("claim %s: got %s, %v", id, j.ID, err)
	}
}

// register stores a worker that beat at hb.
func register(t *testing.T, st store.Store, id, addr string, hb time.Time) {
	t.Helper()
	if err := st.PutWorker(t.Context(), store.Worker{ID: id, Address: addr, Capacity: 2, StartedAt: hb, HeartbeatAt: hb}); err != nil {
		t.Fatal(err)
	}
}

// serveWorker serves Handler on a loopback port and returns its address.
func serveWorker(t *testing.T, secret string, local Guests) string {
	t.Helper()
	srv := httptest.NewServer(Handler(secret, local, testLog(t)))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// apiProxy stands for the API's desktop and Jupyter proxy: it sends
// /v1/jobs/{id}/{rest} to the guest's /proxy/{rest} over the resolved
// client's Transport, and answers a resolve error 409.
func apiProxy(t *testing.T, r *Resolver) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/jobs/{id}/{rest...}", func(w http.ResponseWriter, req *http.Request) {
		g, err := r.Guest(req.Context(), req.PathValue("id"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		rp := &httputil.ReverseProxy{Transport: g.Transport(), Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "guest"
			pr.Out.URL.Path, pr.Out.URL.RawPath = "/proxy/"+req.PathValue("rest"), ""
		}}
		rp.ServeHTTP(w, req)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// get sends req and decodes what the stand-in guest saw.
func get(t *testing.T, hc *http.Client, req *http.Request) seen {
	t.Helper()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s seen
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: status %d, decode: %v", req.Method, req.URL, resp.StatusCode, err)
	}
	return s
}
