package wiring

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/store/postgres"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/internal/wire"
)

const (
	roleToken  = "role-test-token"
	roleSecret = "role-test-secret-0123456789abcdef"
)

// serveRole serves role on a free port of loopback until the test ends or
// stop is called, and returns its URL.
func serveRole(t *testing.T, role, storeURL string) (url string, srv *Server, stop func()) {
	t.Helper()
	return serveWith(t, role, storeURL, nil)
}

// serveWith is serveRole with the configuration changed by mod, if not nil.
func serveWith(t *testing.T, role, storeURL string, mod func(*config.Config)) (url string, srv *Server, stop func()) {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir, cfg.Store, cfg.Role = t.TempDir(), storeURL, role
	cfg.Server.Addr, cfg.Server.Token, cfg.Cluster.Secret = "127.0.0.1:0", roleToken, roleSecret
	cfg.Agent.Kind, cfg.Sandbox.Instance, cfg.Sandbox.GuestBinary = "shell", "rolestest", guestBinary
	if mod != nil {
		mod(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := OpenServer(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-served; err != nil {
				t.Errorf("serve: %v", err)
			}
			s.Close()
		})
	}
	t.Cleanup(stop)
	return "http://" + s.listener.Addr().String(), s, stop
}

// call sends a request with the API token and decodes a JSON answer.
func call(t *testing.T, method, url string, body, out any) int {
	t.Helper()
	var r bytes.Buffer
	if body != nil {
		json.NewEncoder(&r).Encode(body)
	}
	req, _ := http.NewRequest(method, url, &r)
	req.Header.Set("Authorization", "Bearer "+roleToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// TestRoleWorker: a worker serves no API (/v1/jobs answers 401 JSON: its
// internal endpoint takes the cluster secret only),
// answers /healthz, serves /metrics to the cluster secret only, and is in
// the store's worker registry while it runs, with its address and
// capacity; a clean stop removes it.
func TestRoleWorker(t *testing.T) {
	url := testenv.Postgres(t)
	base, srv, stop := serveRole(t, config.RoleWorker, url)
	var e wire.ErrorResponse
	if code := call(t, "GET", base+"/v1/jobs", nil, &e); code != http.StatusUnauthorized || e.Error.Code != wire.CodeUnauthorized {
		t.Errorf("GET /v1/jobs on a worker: %d %+v, want 401 unauthorized", code, e)
	}
	if code := call(t, "GET", base+"/healthz", nil, nil); code != http.StatusOK {
		t.Errorf("GET /healthz: %d", code)
	}
	if code := call(t, "GET", base+"/metrics", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics with the API token: %d, want 401", code)
	}
	metrics := scrape(t, base, roleSecret)
	for _, m := range []string{"agentbox_queue_depth", "agentbox_workers_alive", "agentbox_claim_latency_seconds"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("worker /metrics has no %s", m)
		}
	}
	st, err := postgres.Open(t.Context(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	await(t, "the worker registered with its address and capacity", func() bool {
		ws, err := st.Workers(t.Context())
		return err == nil && len(ws) == 1 && ws[0].ID == workerID(srv.cfg.DataDir) &&
			ws[0].Address == strings.TrimPrefix(base, "http://") && ws[0].Capacity == 2
	})
	stop()
	await(t, "a clean stop removed the worker", func() bool {
		ws, err := st.Workers(t.Context())
		return err == nil && len(ws) == 0
	})
}

// TestRoleAPI: an API replica serves the API and runs no job: a job
// submitted with no worker stays pending, first in the queue; it registers
// no worker, and its metrics count the queue.
func TestRoleAPI(t *testing.T) {
	base, _, _ := serveRole(t, config.RoleAPI, testenv.Postgres(t))
	var sub wire.SubmitResponse
	if code := call(t, "POST", base+"/v1/jobs", wire.SubmitRequest{Task: "echo hi"}, &sub); code != http.StatusCreated {
		t.Fatalf("submit: %d", code)
	}
	// Nothing to await: a claim would come within the scheduler's poll
	// (1s) of the submit's note; look for longer than that.
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		var j wire.Job
		if code := call(t, "GET", base+"/v1/jobs/"+sub.JobID, nil, &j); code != http.StatusOK || j.Status != "pending" ||
			j.QueuePosition != 1 || j.Worker != "" {
			t.Fatalf("job on an API-only server: %d %+v, want pending, queue position 1, no worker", code, j)
		}
	}
	var ws wire.WorkerList
	if code := call(t, "GET", base+"/v1/workers", nil, &ws); code != http.StatusOK || ws.Workers == nil || len(ws.Workers) != 0 {
		t.Errorf("GET /v1/workers: %d %+v, want none", code, ws)
	}
	metrics := scrape(t, base, roleToken)
	for _, m := range []string{"agentbox_queue_depth 1", "agentbox_workers_alive 0"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("api /metrics has no %q:\n%s", m, metrics)
		}
	}
}

// await waits up to 10s for cond.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting: %s", what)
		}
	}
}

// guestBinary is the static agentbox a worker mounts into its sandboxes.
var guestBinary string

func TestMain(m *testing.M) { testenv.MainWithGuest(m, &guestBinary) }

// scrape reads base's /metrics with bearer.
func scrape(t *testing.T, base, bearer string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return b.String()
}
