package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// TestCluster runs a cluster on one machine: PostgreSQL, two API replicas
// and two workers (separate data dirs and ports), the agent talking to the
// scripted model. Twenty jobs submitted through both replicas all end
// complete, each run exactly once, and both workers ran some; an SSE
// stream on replica A follows a job submitted through replica B to its
// end.
func TestCluster(t *testing.T) {
	t.Parallel()
	url := testenv.Postgres(t)
	// Every job: one bash step, then finish once its output is back.
	fake := llmtest.New(t, llmtest.Script{Steps: []llmtest.Step{{Repeat: true, Branches: []llmtest.Turn{
		{When: &llmtest.Match{ResultContains: "ran-in-the-cluster"}, ToolCalls: []llmtest.ToolCall{{Name: "finish", Input: map[string]any{"summary": "done"}}}},
		llmtest.Call("bash", map[string]any{"command": "sleep 0.5; echo ran-in-the-cluster"}),
	}}}})
	common := []string{"AGENTBOX_STORE=" + url, "AGENTBOX_CLUSTER_SECRET=" + testClusterSecret, "AGENTBOX_AGENT=model",
		"ANTHROPIC_API_KEY=test-key", "ANTHROPIC_BASE_URL=" + fake.AnthropicURL(), "AGENTBOX_MODEL=anthropic:claude-sonnet-4-5"}
	var apis, workers []*server
	for range 2 {
		apis = append(apis, newServer(t, append(common, "AGENTBOX_ROLE=api")...))
		workers = append(workers, newServer(t, append(common, "AGENTBOX_ROLE=worker", "AGENTBOX_CONCURRENCY=2")...))
	}
	for _, s := range append(apis, workers...) {
		s.start()
	}
	a, b := apis[0], apis[1]

	// A stream on A, opened before B takes the job it follows.
	first, code := b.submit("job 0 of the cluster")
	if code != http.StatusCreated {
		t.Fatalf("submit through B: %d\n%s", code, b.logs)
	}
	streamed := make(chan []string, 1)
	go func() { streamed <- followSSE(t, a, first) }()

	ids := []string{first}
	for i := 1; i < 20; i++ {
		via := apis[i%2]
		id, code := via.submit(fmt.Sprintf("job %d of the cluster", i))
		if code != http.StatusCreated {
			t.Fatalf("submit %d: %d", i, code)
		}
		ids = append(ids, id)
	}
	final := a.awaitFinal(ids)
	ran := map[string]int{}
	for _, id := range ids {
		if j := final[id]; j.Status != "complete" {
			t.Errorf("job %s: %+v", id, j)
		}
		var runs []string
		for _, e := range a.events(id) {
			var p struct{ Status, Worker string }
			if e.Type == "state" && json.Unmarshal(e.Payload, &p) == nil && p.Status == "running" {
				runs = append(runs, p.Worker)
			}
		}
		if len(runs) != 1 {
			t.Errorf("job %s ran %d times: %v", id, len(runs), runs)
			continue
		}
		ran[runs[0]]++
	}
	if len(ran) != 2 {
		t.Errorf("the jobs ran on %d workers (%v); want both", len(ran), ran)
	}
	t.Logf("jobs per worker: %v", ran)

	select {
	case types := <-streamed:
		if len(types) == 0 || types[len(types)-1] != "state:complete" {
			t.Errorf("replica A's stream of B's job: %v; want it to end with state:complete", types)
		}
	case <-time.After(time.Minute):
		t.Fatal("replica A's stream of B's job did not end")
	}
}

// followSSE reads a job's event stream on s to its end and returns the
// events' types (a state event as state:<status>).
func followSSE(t *testing.T, s *server, id string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/v1/jobs/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("stream: %v", err)
		return nil
	}
	defer resp.Body.Close()
	var types []string
	typ := ""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && typ == "state":
			var e struct {
				Payload struct{ Status string } `json:"payload"`
			}
			_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e)
			types = append(types, "state:"+e.Payload.Status)
		case strings.HasPrefix(line, "data: "):
			types = append(types, typ)
		}
	}
	return types
}
