package api_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/wire"
)

// TestAbuse is the abuse table of issue 3: each bad request gets its 4xx
// with a JSON error body, never a 500.
func TestAbuse(t *testing.T) {
	e := apitest.New(t, api.Config{MaxBodyBytes: 4096})
	id := e.Submit("x").ID
	e.Start(id)
	huge := `{"task":"` + strings.Repeat("a", 8192) + `"}`
	tests := []struct {
		name   string
		r      req
		status int
		code   string
		want   string // in the message
	}{
		{"no token", req{method: "GET", path: "/v1/jobs", noAuth: true}, 401, wire.CodeUnauthorized, "token"},
		{"wrong token", req{method: "GET", path: "/v1/jobs", noAuth: true, header: map[string]string{"Authorization": "Bearer nope"}}, 401, wire.CodeUnauthorized, ""},
		{"token prefix", req{method: "GET", path: "/v1/jobs", noAuth: true, header: map[string]string{"Authorization": "Bearer " + apitest.Token[:5]}}, 401, wire.CodeUnauthorized, ""},
		{"basic auth", req{method: "GET", path: "/v1/jobs", noAuth: true, header: map[string]string{"Authorization": "Basic " + apitest.Token}}, 401, wire.CodeUnauthorized, ""},
		{"metrics without token", req{method: "GET", path: "/metrics", noAuth: true}, 401, wire.CodeUnauthorized, ""},
		{"unknown route without token", req{method: "GET", path: "/nope", noAuth: true}, 401, wire.CodeUnauthorized, ""},
		{"huge body", req{method: "POST", path: "/v1/jobs", body: huge}, 413, wire.CodeTooLarge, "4096"},
		{"huge body alias", req{method: "POST", path: "/submit", body: huge}, 413, wire.CodeTooLarge, ""},
		{"bad json", req{method: "POST", path: "/v1/jobs", body: `{"task":`}, 400, wire.CodeBadRequest, "JSON"},
		{"not json", req{method: "POST", path: "/v1/jobs", body: `task=hello`}, 400, wire.CodeBadRequest, "JSON"},
		{"unknown field", req{method: "POST", path: "/v1/jobs", body: `{"task":"x","priority":1}`}, 400, wire.CodeBadRequest, "priority"},
		{"unknown limits field", req{method: "POST", path: "/v1/jobs", body: `{"task":"x","limits":{"gpus":1}}`}, 400, wire.CodeBadRequest, "gpus"},
		{"wrong type", req{method: "POST", path: "/v1/jobs", body: `{"task":5}`}, 400, wire.CodeBadRequest, `"task" must be a string`},
		{"wrong metadata type", req{method: "POST", path: "/v1/jobs", body: `{"task":"x","metadata":{"a":1}}`}, 400, wire.CodeBadRequest, "metadata"},
		{"bad timeout", req{method: "POST", path: "/v1/jobs", body: `{"task":"x","limits":{"timeout":"soon"}}`}, 400, wire.CodeBadRequest, "limits.timeout"},
		{"bool timeout", req{method: "POST", path: "/v1/jobs", body: `{"task":"x","limits":{"timeout":true}}`}, 400, wire.CodeBadRequest, "limits.timeout"},
		{"bad memory", req{method: "POST", path: "/v1/jobs", body: `{"task":"x","limits":{"memory":"lots"}}`}, 400, wire.CodeBadRequest, "limits.memory"},
		{"fractional memory", req{method: "POST", path: "/v1/jobs", body: `{"task":"x","limits":{"memory":1.5}}`}, 400, wire.CodeBadRequest, "limits.memory"},
		{"trailing data", req{method: "POST", path: "/v1/jobs", body: `{"task":"x"} {"task":"y"}`}, 400, wire.CodeBadRequest, "after"},
		{"array body", req{method: "POST", path: "/v1/jobs", body: `[]`}, 400, wire.CodeBadRequest, "object"},
		{"null body", req{method: "POST", path: "/v1/jobs", body: `null`}, 422, wire.CodeValidation, "task"},
		{"empty body", req{method: "POST", path: "/v1/jobs"}, 400, wire.CodeBadRequest, "empty"},
		{"xml body", req{method: "POST", path: "/v1/jobs", body: `<task>x</task>`, header: map[string]string{"Content-Type": "application/xml"}}, 400, wire.CodeBadRequest, "JSON"},
		{"empty task", req{method: "POST", path: "/v1/jobs", body: `{"task":"  "}`}, 422, wire.CodeValidation, "task"},
		{"timeout too long", req{method: "POST", path: "/v1/jobs", body: `{"task":"x","limits":{"timeout":"48h"}}`}, 400, wire.CodeOverCeiling, "limits.timeout 48h0m0s is over its ceiling 24h0m0s"},
		{"negative cpus", req{method: "POST", path: "/v1/jobs", body: `{"task":"x","limits":{"cpus":-1}}`}, 422, wire.CodeValidation, "cpus"},
		{"absurd cpus", req{method: "POST", path: "/v1/jobs", body: `{"task":"x","limits":{"cpus":1e300}}`}, 400, wire.CodeOverCeiling, "cpus"},
		{"memory over the host", req{method: "POST", path: "/v1/jobs", body: `{"task":"x","limits":{"memory":"1t"}}`}, 400, wire.CodeOverCeiling, "limits.memory 1TiB is over its ceiling"},
		{"tiny disk", req{method: "POST", path: "/v1/jobs", body: `{"task":"x","limits":{"disk":"1m"}}`}, 422, wire.CodeValidation, "disk"},
		{"tiny memory", req{method: "POST", path: "/v1/jobs", body: `{"task":"x","limits":{"memory":"1k"}}`}, 422, wire.CodeValidation, "memory"},
		{"bad list limit", req{method: "GET", path: "/v1/jobs?limit=ten"}, 400, wire.CodeBadRequest, "limit"},
		{"list limit too big", req{method: "GET", path: "/v1/jobs?limit=5000"}, 422, wire.CodeValidation, "limit"},
		{"bad status filter", req{method: "GET", path: "/v1/jobs?status=done"}, 422, wire.CodeValidation, "status"},
		{"forged cursor", req{method: "GET", path: "/v1/jobs?cursor=not-a-cursor"}, 400, wire.CodeBadRequest, "cursor"},
		{"bad after", req{method: "GET", path: "/v1/jobs/" + id + "/events?after=-1"}, 422, wire.CodeValidation, "after"},
		{"bad Last-Event-ID", req{method: "GET", path: "/v1/jobs/" + id + "/events", header: map[string]string{"Accept": "text/event-stream", "Last-Event-ID": "x"}}, 400, wire.CodeBadRequest, "Last-Event-ID"},
		{"unknown job", req{method: "GET", path: "/v1/jobs/job_nope"}, 404, wire.CodeNotFound, ""},
		{"cancel unknown job", req{method: "POST", path: "/v1/jobs/job_nope/cancel"}, 404, wire.CodeNotFound, ""},
		{"events of unknown job", req{method: "GET", path: "/v1/jobs/job_nope/events"}, 404, wire.CodeNotFound, ""},
		{"stream of unknown job", req{method: "GET", path: "/v1/jobs/job_nope/events", header: map[string]string{"Accept": "text/event-stream"}}, 404, wire.CodeNotFound, ""},
		{"artifacts of unknown job", req{method: "GET", path: "/v1/jobs/job_nope/artifacts.zip"}, 404, wire.CodeNotFound, ""},
		{"file of unknown job", req{method: "GET", path: "/v1/jobs/job_nope/files/a.txt"}, 404, wire.CodeNotFound, ""},
		{"status of unknown job", req{method: "GET", path: "/status/job_nope"}, 404, wire.CodeNotFound, ""},
		{"artifacts while running", req{method: "GET", path: "/v1/jobs/" + id + "/artifacts.zip"}, 409, wire.CodeNotEnded, "running"},
		{"file while running", req{method: "GET", path: "/v1/jobs/" + id + "/files/a.txt"}, 409, wire.CodeNotEnded, ""},
		{"unknown route", req{method: "GET", path: "/v2/jobs"}, 404, wire.CodeNotFound, "/v2/jobs"},
		{"wrong method", req{method: "PUT", path: "/v1/jobs/" + id}, 405, wire.CodeMethodNotAllowed, "GET, DELETE"},
		{"unclean path", req{method: "GET", path: "/v1/jobs/../healthz"}, 400, wire.CodeBadRequest, "clean"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := do(t, e, tt.r)
			got := wantError(t, resp, b, tt.status, tt.code)
			if !strings.Contains(got.Message, tt.want) {
				t.Errorf("message %q does not mention %q", got.Message, tt.want)
			}
			if tt.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if tt.status == 405 && resp.Header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
		})
	}
}

// TestAnyContentTypeWorks: curl -d sends a form type; the body decides.
func TestAnyContentTypeWorks(t *testing.T) {
	e := apitest.New(t, api.Config{})
	for _, ct := range []string{"", "application/x-www-form-urlencoded", "text/plain"} {
		resp, b := do(t, e, req{method: "POST", path: "/v1/jobs", body: `{"task":"x"}`, header: map[string]string{"Content-Type": ct}})
		if resp.StatusCode != 201 {
			t.Errorf("Content-Type %q: %d %s", ct, resp.StatusCode, b)
		}
	}
}

// TestHugeChunkedBody sends a body without Content-Length, so the limit is
// found while reading.
func TestHugeChunkedBody(t *testing.T) {
	e := apitest.New(t, api.Config{MaxBodyBytes: 1024})
	body := io.MultiReader(strings.NewReader(`{"task":"`), bytes.NewReader(bytes.Repeat([]byte("a"), 1<<20)), strings.NewReader(`"}`))
	r, _ := http.NewRequest("POST", e.URL+"/v1/jobs", body)
	r.Header.Set("Authorization", "Bearer "+apitest.Token)
	r.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	wantError(t, resp, b, http.StatusRequestEntityTooLarge, wire.CodeTooLarge)
}

func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	e := apitest.New(t, api.Config{Tokens: []string{"other", apitest.Token}})
	resp, b := do(t, e, req{method: "GET", path: "/v1/jobs", noAuth: true, header: map[string]string{"Authorization": "bearer " + apitest.Token}})
	if resp.StatusCode != 200 {
		t.Errorf("status %d: %s", resp.StatusCode, b)
	}
}

func TestNoTokenConfiguredRefusesAll(t *testing.T) {
	e := apitest.New(t, api.Config{Tokens: []string{}})
	resp, b := do(t, e, req{method: "GET", path: "/v1/jobs", header: map[string]string{"Authorization": "Bearer "}})
	wantError(t, resp, b, 401, wire.CodeUnauthorized)
}

// TestNoAuthNeedsLoopbackHost: without auth, a Host a DNS-rebinding page
// could make a browser send is refused, and so is another site's page.
func TestNoAuthNeedsLoopbackHost(t *testing.T) {
	e := apitest.New(t, api.Config{NoAuth: true})
	for host, want := range map[string]int{"localhost:8080": 200, "127.0.0.1:8080": 200, "[::1]:8080": 200, "app.localhost": 200, "evil.example.com": 403} {
		resp, b := do(t, e, req{method: "GET", path: "/v1/jobs", noAuth: true, header: map[string]string{"Host": host}})
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d %s, want %d", host, resp.StatusCode, b, want)
		}
	}
	for origin, want := range map[string]int{"http://localhost:8080": 201, "http://127.0.0.1:8080": 201, "https://evil.example.com": 403, "http://10.0.0.8": 403, "null": 403} {
		resp, b := do(t, e, req{method: "POST", path: "/v1/jobs", body: `{"task":"x"}`, noAuth: true, header: map[string]string{"Origin": origin}})
		if resp.StatusCode != want {
			t.Errorf("Origin %s: %d %s, want %d", origin, resp.StatusCode, b, want)
		}
	}
	// A page served on this origin (a sandbox's proxied desktop or notebook)
	// must not reach the API: its requests carry Sec-Fetch-Site.
	for site, want := range map[string]int{"same-origin": 403, "same-site": 403, "cross-site": 403, "none": 200} {
		resp, b := do(t, e, req{method: "GET", path: "/v1/jobs", noAuth: true, header: map[string]string{"Sec-Fetch-Site": site}})
		if resp.StatusCode != want {
			t.Errorf("Sec-Fetch-Site %s: %d %s, want %d", site, resp.StatusCode, b, want)
		}
	}
}
