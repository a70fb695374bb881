package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/internal/wire"
)

const testClusterSecret = "cluster-secret-0123456789abcdef0123"

// TestClusterLite runs one `serve --role api` and one `serve --role
// worker` (separate data dirs and ports) on one PostgreSQL database: a job
// submitted to the API runs on the worker, its status naming the worker
// while it runs, and completes; the API lists the worker alive with its
// capacity (GET /v1/workers, agentbox workers); the worker serves no API.
func TestClusterLite(t *testing.T) {
	t.Parallel()
	url := testenv.Postgres(t)
	api := newServer(t, "AGENTBOX_ROLE=api", "AGENTBOX_STORE="+url, "AGENTBOX_CLUSTER_SECRET="+testClusterSecret)
	worker := newServer(t, "AGENTBOX_ROLE=worker", "AGENTBOX_STORE="+url, "AGENTBOX_CLUSTER_SECRET="+testClusterSecret,
		"AGENTBOX_CONCURRENCY=3")
	api.start()
	worker.start()
	var ws wire.WorkerList
	waitUntil(t, 30*time.Second, func() bool {
		return api.do("GET", "/v1/workers", nil, &ws) == 200 && len(ws.Workers) == 1
	})
	w := ws.Workers[0]
	if !w.Alive || w.Capacity != 3 || w.Address != strings.TrimPrefix(worker.url, "http://") {
		t.Errorf("worker %+v: want alive, capacity 3, address %s", w, worker.url)
	}
	// A worker serves no API: the API's token is no credential there, and
	// with the cluster secret there is no such route.
	if code := worker.do("GET", "/v1/jobs", nil, nil); code != 401 {
		t.Errorf("GET /v1/jobs on the worker with the API token: %d, want 401", code)
	}
	req, _ := http.NewRequest("GET", worker.url+"/v1/jobs", nil)
	req.Header.Set("Authorization", "Bearer "+testClusterSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("GET /v1/jobs on the worker with the cluster secret: %d, want 404", resp.StatusCode)
	}
	id, code := api.submit("sleep 2; echo done")
	if code != 201 {
		t.Fatalf("submit: %d\n%s", code, api.logs)
	}
	var running wire.Job
	waitUntil(t, time.Minute, func() bool {
		return api.do("GET", "/v1/jobs/"+id, nil, &running) == 200 && running.Status != "pending"
	})
	if running.Status != "running" || running.Worker != w.WorkerID {
		t.Errorf("job %s %q on worker %q, want running on %q", id, running.Status, running.Worker, w.WorkerID)
	}
	out, _, err := run(t.Context(), "status", "--url", api.url, "--token", testToken, id)
	if err != nil || !strings.Contains(out, "worker:") || !strings.Contains(out, w.WorkerID) {
		t.Errorf("agentbox status of the running job: %v\n%s", err, out)
	}
	if j := api.awaitFinal([]string{id})[id]; j.Status != "complete" {
		t.Fatalf("job %+v\napi:\n%s\nworker:\n%s", j, api.logs, worker.logs)
	}
	var done wire.Job
	api.do("GET", "/v1/jobs/"+id, nil, &done)
	if done.Worker != "" || done.QueuePosition != 0 {
		t.Errorf("ended job names worker %q, queue position %d", done.Worker, done.QueuePosition)
	}
	out, _, err = run(t.Context(), "workers", "--url", api.url, "--token", testToken)
	if err != nil || !strings.Contains(out, "WORKER") || !strings.Contains(out, w.WorkerID) || !strings.Contains(out, "yes") {
		t.Errorf("agentbox workers: %v\n%s", err, out)
	}
	out, _, err = run(t.Context(), "workers", "--json", "--url", api.url, "--token", testToken)
	var list wire.WorkerList
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list.Workers) != 1 || list.Workers[0].Capacity != 3 {
		t.Errorf("agentbox workers --json: %v\n%s", err, out)
	}
	out, _, err = run(t.Context(), "status", "--url", api.url, "--token", testToken, id)
	if err != nil || !strings.Contains(out, "complete") {
		t.Errorf("agentbox status: %v\n%s", err, out)
	}

	checkUploadThroughReplica(t, api)
	checkDesktopThroughReplica(t, api, worker)
}

// checkUploadThroughReplica submits a job with a workspace uploaded to the
// API replica: the worker (another data dir, another host for all it
// knows) starts from those files, through the blob store, and the replica
// serves the files, the diff and the zip of what the job changed.
func checkUploadThroughReplica(t *testing.T, api *server) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("UPLOADED-TO-THE-REPLICA\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runClient(t.Context(), "", "submit", "--url", api.url, "--token", testToken, "--workspace", dir,
		"cp notes.txt seen.txt && echo changed >> notes.txt")
	if err != nil {
		t.Fatalf("submit with a workspace: %v\n%s", err, errOut)
	}
	id := strings.TrimSpace(out)
	if j := api.awaitFinal([]string{id})[id]; j.Status != "complete" {
		t.Fatalf("job %+v\n%s", j, api.logs)
	}
	if got := string(api.get(t, "/v1/jobs/"+id+"/files/seen.txt", 200)); got != "UPLOADED-TO-THE-REPLICA\n" {
		t.Errorf("seen.txt through the replica: %q; want the uploaded notes", got)
	}
	if diff := string(api.get(t, "/v1/jobs/"+id+"/diff", 200)); !strings.Contains(diff, "+changed") || !strings.Contains(diff, "seen.txt") {
		t.Errorf("the diff through the replica:\n%s", diff)
	}
	if f := api.zipFiles(t, id); f["notes.txt"] != "UPLOADED-TO-THE-REPLICA\nchanged\n" {
		t.Errorf("notes.txt in the zip through the replica: %q", f["notes.txt"])
	}
}

// checkDesktopThroughReplica opens the desktop of a job running on the
// worker through the API replica, which reaches it over the worker's
// internal endpoint; that endpoint refuses anyone without the secret.
func checkDesktopThroughReplica(t *testing.T, api, worker *server) {
	t.Helper()
	id, code := api.submit("sleep 120")
	if code != 201 {
		t.Fatalf("submit: %d", code)
	}
	defer api.do("POST", "/v1/jobs/"+id+"/cancel", nil, nil)
	waitUntil(t, time.Minute, func() bool { return api.job(id).Status == "running" })
	var page []byte
	waitUntil(t, time.Minute, func() bool { // the desktop starts with its first viewer
		req, _ := http.NewRequest("GET", api.url+"/v1/jobs/"+id+"/desktop/vnc.html", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		page, _ = io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK
	})
	if !strings.Contains(string(page), "noVNC") {
		t.Errorf("the desktop through the API replica is not noVNC:\n%.300s", page)
	}
	for _, auth := range []string{"", "Bearer " + testToken, "Bearer " + testClusterSecret + "x"} {
		req, _ := http.NewRequest("GET", worker.url+"/internal/v1/jobs/"+id+"/guest/proxy/desktop/vnc.html", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the worker's internal endpoint with %q: %d, want 401", auth, resp.StatusCode)
		}
	}
}
