package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

func TestSubmitAndGet(t *testing.T) {
	e := apitest.New(t, api.Config{})
	resp, b := do(t, e, req{method: "POST", path: "/v1/jobs", body: `{"task":"write hello.py","model":"anthropic:claude",
		"limits":{"timeout":"30m","max_steps":40,"memory":"1g","cpus":1.5},"metadata":{"team":"infra"}}`})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	sr := decode[wire.SubmitResponse](t, b)
	if sr.Status != "pending" || sr.Links.Self != "/v1/jobs/"+sr.JobID || resp.Header.Get("Location") != sr.Links.Self {
		t.Errorf("submit response %+v, Location %q", sr, resp.Header.Get("Location"))
	}
	j := getJob(t, e, sr.JobID)
	wantLimits := wire.Limits{Timeout: wire.Duration(30 * time.Minute), MaxSteps: 40, Memory: 1 << 30, CPUs: 1.5}
	if j.Task != "write hello.py" || j.Model != "anthropic:claude" || j.Limits != wantLimits || j.Metadata["team"] != "infra" {
		t.Errorf("job = %+v", j)
	}
	if j.CreatedAt.IsZero() || j.CreatedAt.Location() != time.UTC || !j.StartedAt.IsZero() || j.MaxAttempts != 3 {
		t.Errorf("timestamps/attempts: %+v", j)
	}
	if j.Links.Events != "/v1/jobs/"+j.JobID+"/events" || j.Links.Artifacts != "/v1/jobs/"+j.JobID+"/artifacts.zip" {
		t.Errorf("links = %+v", j.Links)
	}
}

func TestLimitsAcceptNumbers(t *testing.T) {
	e := apitest.New(t, api.Config{})
	sr := submit(t, e, `{"task":"x","limits":{"timeout":90,"memory":134217728}}`)
	j := getJob(t, e, sr.JobID)
	if j.Limits.Timeout != wire.Duration(90*time.Second) || j.Limits.Memory != 128<<20 {
		t.Errorf("limits = %+v", j.Limits)
	}
	_, b := do(t, e, req{method: "GET", path: "/v1/jobs/" + sr.JobID})
	if !contains(b, `"timeout":"1m30s"`) || !contains(b, `"memory":134217728`) {
		t.Errorf("limits not in canonical form: %s", b)
	}
}

func TestIdempotencyKey(t *testing.T) {
	e := apitest.New(t, api.Config{})
	key := map[string]string{"Idempotency-Key": "k-1"}
	r1, b1 := do(t, e, req{method: "POST", path: "/v1/jobs", body: `{"task":"once"}`, header: key})
	r2, b2 := do(t, e, req{method: "POST", path: "/v1/jobs", body: `{"task":"once"}`, header: key})
	if r1.StatusCode != 201 || r2.StatusCode != 201 {
		t.Fatalf("statuses %d %d", r1.StatusCode, r2.StatusCode)
	}
	a, b := decode[wire.SubmitResponse](t, b1), decode[wire.SubmitResponse](t, b2)
	if a.JobID != b.JobID || r2.Header.Get("Idempotent-Replayed") != "true" || r1.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("replay gave %s then %s (replayed header %q)", a.JobID, b.JobID, r2.Header.Get("Idempotent-Replayed"))
	}
	resp, body := do(t, e, req{method: "POST", path: "/v1/jobs", body: `{"task":"another"}`, header: key})
	wantError(t, resp, body, http.StatusUnprocessableEntity, wire.CodeIdempotencyConflict)
	page := listJobs(t, e, "")
	if len(page.Jobs) != 1 {
		t.Errorf("%d jobs, want 1", len(page.Jobs))
	}
}

func listJobs(t *testing.T, e *apitest.Env, query string) wire.JobList {
	t.Helper()
	resp, b := do(t, e, req{method: "GET", path: "/v1/jobs" + query})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("list: %d %s", resp.StatusCode, b)
	}
	return decode[wire.JobList](t, b)
}

func TestListFiltersAndPages(t *testing.T) {
	e := apitest.New(t, api.Config{})
	var ids []string
	for i := range 5 {
		ids = append(ids, e.Submit(fmt.Sprintf("task %d", i)).ID)
	}
	e.Start(ids[1])
	e.Finish(ids[2], store.StatusComplete, "")
	if got := listJobs(t, e, "?status=running"); len(got.Jobs) != 1 || got.Jobs[0].JobID != ids[1] {
		t.Errorf("running: %+v", got.Jobs)
	}
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		p := listJobs(t, e, "?limit=2&cursor="+cursor)
		for _, j := range p.Jobs {
			seen[j.JobID] = true
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != 5 {
		t.Errorf("paging saw %d jobs, want 5", len(seen))
	}
}

func TestCancel(t *testing.T) {
	e := apitest.New(t, api.Config{})
	id := e.Submit("long").ID
	resp, b := do(t, e, req{method: "POST", path: "/v1/jobs/" + id + "/cancel"})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", resp.StatusCode, b)
	}
	if j := decode[wire.Job](t, b); j.Status != "canceled" || !j.CancelRequested || j.EndedAt.IsZero() {
		t.Errorf("canceled job = %+v", j)
	}
	resp, b = do(t, e, req{method: "POST", path: "/v1/jobs/" + id + "/cancel"})
	wantError(t, resp, b, http.StatusConflict, wire.CodeAlreadyEnded)

	running := e.Submit("running").ID
	e.Start(running)
	resp, b = do(t, e, req{method: "POST", path: "/v1/jobs/" + running + "/cancel"})
	if j := decode[wire.Job](t, b); resp.StatusCode != http.StatusAccepted || j.Status != "running" || !j.CancelRequested {
		t.Errorf("cancel of a running job: %d %+v", resp.StatusCode, j)
	}
}

func TestLegacyAliases(t *testing.T) {
	e := apitest.New(t, api.Config{})
	for _, p := range []string{"/schedule", "/submit"} {
		resp, b := do(t, e, req{method: "POST", path: p, body: `{"task":"Build me a todo app"}`})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, b)
		}
		id := decode[wire.LegacySubmitResponse](t, b).JobID
		resp, b = do(t, e, req{method: "GET", path: "/status/" + id})
		if st := decode[wire.LegacyStatus](t, b); resp.StatusCode != 200 || st.Status != "pending" || st.Result != "" {
			t.Errorf("status of new job: %d %+v", resp.StatusCode, st)
		}
		e.Finish(id, store.StatusComplete, "")
		e.WriteFile(id, "app.js", "todo")
		_, b = do(t, e, req{method: "GET", path: "/status/" + id})
		st := decode[wire.LegacyStatus](t, b)
		if st.Status != "complete" || st.Result != "/v1/jobs/"+id+"/artifacts.zip" {
			t.Fatalf("status of complete job: %+v", st)
		}
		if resp, b := do(t, e, req{method: "GET", path: st.Result}); resp.StatusCode != 200 || len(b) == 0 {
			t.Errorf("download of result: %d", resp.StatusCode)
		}
	}
	failed := e.Submit("x").ID
	e.Finish(failed, store.StatusError, "sandbox died")
	_, b := do(t, e, req{method: "GET", path: "/status/" + failed})
	if st := decode[wire.LegacyStatus](t, b); st.Status != "error" || st.Error != "sandbox died" || st.Result != "" {
		t.Errorf("status of failed job: %+v", st)
	}
}

func TestAbsoluteLinksWithBaseURL(t *testing.T) {
	e := apitest.New(t, api.Config{BaseURL: "https://agentbox.example.com/"})
	sr := submit(t, e, `{"task":"x"}`)
	if sr.Links.Artifacts != "https://agentbox.example.com/v1/jobs/"+sr.JobID+"/artifacts.zip" {
		t.Errorf("links = %+v", sr.Links)
	}
}

func TestHealthAndMetrics(t *testing.T) {
	e := apitest.New(t, api.Config{})
	resp, b := do(t, e, req{method: "GET", path: "/healthz", noAuth: true})
	if resp.StatusCode != 200 || decode[wire.Health](t, b).Status != "ok" {
		t.Errorf("healthz: %d %s", resp.StatusCode, b)
	}
	do(t, e, req{method: "GET", path: "/v1/jobs/nope"})
	resp, b = do(t, e, req{method: "GET", path: "/metrics"})
	if resp.StatusCode != 200 || !contains(b, `agentbox_http_requests_total{code="404",route="GET /v1/jobs/{id}"} 1`) {
		t.Errorf("metrics: %d\n%s", resp.StatusCode, b)
	}
	resp, b = do(t, e, req{method: "GET", path: "/v1/openapi.json"})
	if resp.StatusCode != 200 || !contains(b, `"openapi": "3.1.0"`) {
		t.Errorf("openapi.json: %d", resp.StatusCode)
	}
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }

func TestLimitsOverCeilings(t *testing.T) {
	e := apitest.New(t, api.Config{})
	e.Configure(func(c *jobs.ServiceConfig) {
		c.Ceilings = config.Ceilings{MemoryBytes: 8 << 30, NanoCPUs: 2e9, PidsLimit: 4096, DiskBytes: 20 << 30, Timeout: time.Hour, MaxSteps: 500}
	})
	for _, tt := range []struct{ limits, want string }{
		{`{"memory":"1t"}`, "limits.memory 1TiB is over its ceiling 8GiB (AGENTBOX_CEILING_MEMORY)"},
		{`{"cpus":3}`, "limits.cpus 3 is over its ceiling 2 (AGENTBOX_CEILING_CPUS)"},
		{`{"disk":"50g"}`, "limits.disk 50GiB is over its ceiling 20GiB (AGENTBOX_CEILING_DISK)"},
		{`{"timeout":"2h"}`, "limits.timeout 2h0m0s is over its ceiling 1h0m0s (AGENTBOX_CEILING_TIMEOUT)"},
		{`{"max_steps":501}`, "limits.max_steps 501 is over its ceiling 500 (AGENTBOX_CEILING_STEPS)"},
	} {
		resp, b := do(t, e, req{method: "POST", path: "/v1/jobs", body: `{"task":"x","limits":` + tt.limits + `}`})
		if resp.StatusCode != http.StatusBadRequest || !contains(b, `"code":"over_ceiling"`) || !contains(b, tt.want) {
			t.Errorf("%s: %d %s, want 400 over_ceiling naming %q", tt.limits, resp.StatusCode, b, tt.want)
		}
	}
	// At the ceilings, a job is accepted, and its disk quota is kept.
	sr := submit(t, e, `{"task":"x","limits":{"memory":"8g","cpus":2,"disk":"20g","timeout":"1h","max_steps":500}}`)
	if j := getJob(t, e, sr.JobID); j.Limits.Disk != 20<<30 || j.Limits.Memory != 8<<30 {
		t.Errorf("limits = %+v", j.Limits)
	}
}
