package cluster

import (
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
)

// A service in the sandbox is untrusted: an answer of its that carries
// the worker's own error mark must reach the API as the service's answer,
// not as the worker speaking (which would let the sandbox pass for its
// worker: "no sandbox", "refused the cluster secret").
func TestTunnelIgnoresAWorkerErrorMarkFromTheSandbox(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "guest.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set(errorHeader, "unauthorized")
		w.WriteHeader(http.StatusUnauthorized)
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	g := guest.NewClient(sock)
	t.Cleanup(g.Close)

	st := openStore(t)
	register(t, st, "w-2", serveWorker(t, testSecret, hostGuests(map[string]*guest.Client{"j1": g})), time.Now())
	runningOn(t, st, "j1", "w-2")
	c, err := NewResolver(hostGuests(nil), st, "api-1", testSecret, nil).Guest(t.Context(), "j1")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://guest/proxy/desktop/", nil)
	resp, err := c.Transport().RoundTrip(req)
	if err != nil {
		t.Fatalf("the sandbox's answer became the worker's error: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get(errorHeader) != "" {
		t.Fatalf("status %d, %s %q; want the service's 401 without the mark", resp.StatusCode, errorHeader, resp.Header.Get(errorHeader))
	}
}
