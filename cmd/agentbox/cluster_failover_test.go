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

	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/internal/wire"
)

// TestClusterFailover kills a worker with -9 while it runs two jobs, each
// past a step that wrote a file and inside a long one: when their leases
// expire they resume on the other worker from their last checkpoints
// (in the Postgres database, the default blob store of a cluster), find
// the files the checkpointed step wrote, and complete; the model is told
// what was lost; the API replica serves their files, diffs and zips, from
// their checkpoints while they run.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	url := testenv.Postgres(t)
	// Step 1 writes a file; step 2 sleeps until the worker is killed; after
	// the resume the model checks the file is there and finishes.
	fake := llmtest.New(t, llmtest.Script{Steps: []llmtest.Step{{Repeat: true, Branches: []llmtest.Turn{
		when("checkpoint-ok", llmtest.Call("finish", map[string]any{"summary": "resumed with the files of step 1"})),
		when("No such file", llmtest.Call("finish", map[string]any{"summary": "step 1's file was lost"})),
		when("interrupted", llmtest.Call("bash", map[string]any{"command": "cat step1.txt && echo checkpoint-ok"})),
		when("step-one-written", llmtest.Call("bash", map[string]any{"command": "sleep 600"})),
		llmtest.Call("bash", map[string]any{"command": "mkdir -p out && echo one > step1.txt && echo two > out/nested.txt && echo step-one-written"}),
	}}}})
	common := []string{"AGENTBOX_STORE=" + url, "AGENTBOX_CLUSTER_SECRET=" + testClusterSecret, "AGENTBOX_AGENT=model",
		"ANTHROPIC_API_KEY=test-key", "ANTHROPIC_BASE_URL=" + fake.AnthropicURL(), "AGENTBOX_MODEL=anthropic:claude-sonnet-4-5",
		"AGENTBOX_LEASE=4s"}
	api := newServer(t, append(common, "AGENTBOX_ROLE=api")...)
	doomed := newServer(t, append(common, "AGENTBOX_ROLE=worker", "AGENTBOX_CONCURRENCY=2")...)
	survivor := newServer(t, append(common, "AGENTBOX_ROLE=worker", "AGENTBOX_CONCURRENCY=2")...)
	api.start()
	doomed.start() // alone at first: both jobs run on it

	var ids []string
	for _, task := range []string{"failover job A", "failover job B"} {
		id, code := api.submit(task)
		if code != 201 {
			t.Fatalf("submit: %d\n%s", code, api.logs)
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		awaitCheckpoint(t, api, id, 1)
	}
	var before wire.Job
	api.do("GET", "/v1/jobs/"+ids[0], nil, &before)
	// While they run, the replica serves their last checkpoints.
	if got := string(api.get(t, "/v1/jobs/"+ids[0]+"/files/step1.txt", 200)); before.Status != "running" || got != "one\n" {
		t.Errorf("running job %s (%s): step1.txt through the replica %q; want its checkpoint's", ids[0], before.Status, got)
	}
	if diff := string(api.get(t, "/v1/jobs/"+ids[0]+"/diff", 200)); !strings.Contains(diff, "+one") {
		t.Errorf("running job's diff through the replica:\n%s", diff)
	}
	survivor.start()
	if err := doomed.cmd.Process.Kill(); err != nil { // SIGKILL: no hand-back, no last heartbeat
		t.Fatal(err)
	}
	doomed.cmd.Wait()
	t.Logf("killed worker %s running %v", before.Worker, ids)

	final := api.awaitFinal(ids)
	for _, id := range ids {
		var j wire.Job
		api.do("GET", "/v1/jobs/"+id, nil, &j)
		if final[id].Status != "complete" || j.Result != "resumed with the files of step 1" {
			t.Errorf("job %s: %s %q %q; want complete, resumed with its files\nsurvivor:\n%s", id, j.Status, j.Result, j.Error, survivor.logs)
		}
		workers := runningWorkers(api, id)
		if len(workers) != 2 || workers[0] != before.Worker || workers[1] == before.Worker {
			t.Errorf("job %s ran on %v; want the killed worker %s, then the other", id, workers, before.Worker)
		}
		if !hasNotice(api, id, "after step 1 (the last checkpoint)") {
			var types []string
			for _, e := range api.events(id) {
				types = append(types, e.Type+" "+string(e.Payload))
			}
			t.Errorf("job %s: no notice tells what the restore from the checkpoint lost:\n%s", id, strings.Join(types, "\n"))
		}
		if got := string(api.get(t, "/v1/jobs/"+id+"/files/out/nested.txt", 200)); got != "two\n" {
			t.Errorf("job %s: out/nested.txt through the API replica: %q", id, got)
		}
		if files := api.zipFiles(t, id); files["step1.txt"] != "one\n" {
			t.Errorf("job %s: the zip through the API replica holds step1.txt %q", id, files["step1.txt"])
		}
	}
	survivorMetrics(t, survivor)

	// What the killed worker left on this host: its containers (removed
	// as its test instance's) and their loop disks, which the test's
	// clean-up unmounts so that no loop device outlives the run.
	removeInstance(t, "servetest-"+filepath.Base(doomed.dataDir))
	testenv.UnmountUnder(doomed.dataDir)
	if b, err := os.ReadFile("/proc/self/mounts"); err == nil && strings.Contains(string(b), doomed.dataDir+"/") {
		t.Errorf("mounts under the killed worker's data dir remain:\n%s", b)
	}
}

// survivorMetrics checks the survivor's /metrics (a bearer of the cluster
// secret) count the checkpoints it took, and that, the jobs changing no
// file after their restore, they uploaded nothing.
func survivorMetrics(t *testing.T, w *server) {
	t.Helper()
	req, _ := http.NewRequest("GET", w.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testClusterSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	text := string(b)
	if n := metricValue(t, text, `agentbox_checkpoint_seconds_count{result="ok"}`); n < 2 {
		t.Errorf("the survivor counts %v checkpoints; it took at least one per job", n)
	}
	// It restored the files and changed none: nothing new to upload.
	if n := metricValue(t, text, "agentbox_checkpoint_uploaded_bytes_total"); n != 0 {
		t.Errorf("the survivor uploaded %v bytes of checkpoints; the jobs changed no file on it", n)
	}
}

// awaitCheckpoint waits until job id has a checkpoint of step (or later)
// in its log.
func awaitCheckpoint(t *testing.T, s *server, id string, step int) {
	t.Helper()
	waitUntil(t, 2*time.Minute, func() bool {
		for _, e := range s.events(id) {
			var p struct{ Step int }
			if e.Type == "checkpoint" && json.Unmarshal(e.Payload, &p) == nil && p.Step >= step {
				return true
			}
		}
		return false
	})
}

// runningWorkers lists the workers job id's attempts ran on, in order.
func runningWorkers(s *server, id string) []string {
	var runs []string
	for _, e := range s.events(id) {
		var p struct{ Status, Worker string }
		if e.Type == "state" && json.Unmarshal(e.Payload, &p) == nil && p.Status == "running" {
			runs = append(runs, p.Worker)
		}
	}
	return runs
}

// hasNotice reports whether job id's log has a notice that says text.
func hasNotice(s *server, id, text string) bool {
	for _, e := range s.events(id) {
		var p struct{ Text string }
		if e.Type == "notice" && json.Unmarshal(e.Payload, &p) == nil && strings.Contains(p.Text, text) {
			return true
		}
	}
	return false
}
