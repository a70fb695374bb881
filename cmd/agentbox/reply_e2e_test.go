package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/wire"
)

// TestReplyContinuesACompletedJob: `agentbox reply -f` on a completed job
// runs its second turn in the same workspace: the model's first request of
// that turn holds the whole first turn and then the follow-up, a file the
// first turn wrote is there, the log goes on with no gap (message, pending,
// running, ... complete), and the job shows turn 2 with both turns' steps.
// Then the refusals: bad messages, an unknown job, a deleted one.
func TestReplyContinuesACompletedJob(t *testing.T) {
	const task, followUp = "Write notes.txt", "Now read the notes back to me"
	s, fake := modelServer(t, "anthropic", llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("write_file", map[string]any{"path": "notes.txt", "content": "from turn one\n"})),
		step(llmtest.Call("finish", map[string]any{"summary": "notes.txt written"})),
		step(llmtest.Call("read_file", map[string]any{"path": "notes.txt"})),
		step(when("from turn one", llmtest.Call("finish", map[string]any{"summary": "it says: from turn one"})),
			llmtest.Call("finish", map[string]any{"summary": "FAILED: the notes are gone"})),
	}})
	j := s.runJob(t, task, nil)
	if j.Status != "complete" {
		t.Fatalf("turn 1: %+v\n%s", j, s.logs)
	}
	s.useCLI(t)
	out, errOut, err := runClient(context.Background(), "", "reply", "--follow", j.JobID, followUp)
	if err != nil || !strings.Contains(errOut, "» message (turn 2): "+followUp) || !strings.Contains(errOut, "[complete]") {
		t.Fatalf("agentbox reply -f: %v\nstdout: %s\nstderr: %s\nserver: %s", err, out, errOut, s.logs)
	}

	reqs := fake.Requests()
	if len(reqs) != 4 {
		t.Fatalf("the model was asked %d times, want 4", len(reqs))
	}
	turn2 := reqs[2].Messages
	if !strings.Contains(turn2[0].PlainText(), task) || len(turn2) != len(reqs[1].Messages)+2 {
		t.Errorf("turn 2's first request does not hold turn 1: %d messages, turn 1's last request %d", len(turn2), len(reqs[1].Messages))
	}
	if !hasToolUse(turn2, "write_file") || !hasToolUse(turn2, "finish") {
		t.Errorf("turn 2's first request lacks turn 1's calls")
	}
	last := turn2[len(turn2)-1].Content
	if len(last) != 2 || last[0].Type != llm.BlockToolResult || last[1].Type != llm.BlockText || last[1].Text != followUp {
		t.Errorf("turn 2's first request ends with %+v; want finish's result, then the follow-up", last)
	}
	if texts, _ := s.toolResults(j.JobID); len(texts) != 4 || !strings.Contains(texts[2], "from turn one") {
		t.Errorf("tool results %q: turn 2 did not find turn 1's file", texts)
	}

	var full struct {
		jobDTO
		Turn   int    `json:"turn"`
		Result string `json:"result"`
	}
	s.do("GET", "/v1/jobs/"+j.JobID, nil, &full)
	if full.Status != "complete" || full.Turn != 2 || full.Steps != 4 || full.Attempts != 1 || full.Result != "it says: from turn one" {
		t.Errorf("job after turn 2: %+v", full)
	}
	evs := s.events(j.JobID)
	var kinds []string
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: a gap", i, ev.Seq)
		}
		kinds = append(kinds, kindOf(ev))
	}
	got := strings.Join(kinds, " ")
	if want := "state:complete message state:pending state:running sandbox model tool_call tool_result model tool_call tool_result state:complete"; !strings.HasSuffix(got, want) {
		t.Errorf("the log ends %s\nwant ... %s", got, want)
	}

	checkReplyRefusals(t, s, j.JobID)
}

// checkReplyRefusals: bad messages are 400, an unknown job 404, and once
// the job's data is deleted its messages are 410.
func checkReplyRefusals(t *testing.T, s *server, id string) {
	for _, body := range []string{`{"message": ""}`, `{"message": "   "}`, "{\"message\": \"caf\xe9\"}",
		`{"message": "` + strings.Repeat("x", 256<<10+1) + `"}`} {
		if code := s.postRaw(id, body); code != http.StatusBadRequest {
			t.Errorf("message %.40q: %d, want 400", body, code)
		}
	}
	if code := s.postRaw("job_00000000000000nope", `{"message": "hi"}`); code != http.StatusNotFound {
		t.Errorf("unknown job: %d, want 404", code)
	}
	if code := s.do("DELETE", "/v1/jobs/"+id, nil, nil); code != http.StatusOK {
		t.Fatalf("delete: %d", code)
	}
	if code := s.postRaw(id, `{"message": "hi"}`); code != http.StatusGone {
		t.Errorf("deleted job: %d, want 410", code)
	}
}

// TestReplySteersARunningJob: a message posted while a tool runs reaches
// the model in its next request, after that step's tool results. The
// tool waits for a file the test makes in the sandbox once the message is
// posted.
func TestReplySteersARunningJob(t *testing.T) {
	t.Parallel()
	const steer = "Also print the date"
	s, fake := modelServer(t, "openai", llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("bash", map[string]any{"command": "until [ -e go ]; do sleep 0.05; done; echo released"})),
		step(llmtest.Call("finish", map[string]any{"summary": "done"})),
	}})
	var j jobDTO
	if code := s.do("POST", "/v1/jobs", map[string]any{"task": "Wait for go, then finish"}, &j); code != 201 {
		t.Fatalf("submit: %d\n%s", code, s.logs)
	}
	waitUntil(t, 2*time.Minute, func() bool {
		for _, ev := range s.events(j.JobID) {
			if ev.Type == "tool_call" {
				return true
			}
		}
		return false
	})
	var got wire.Job
	if code := s.do("POST", "/v1/jobs/"+j.JobID+"/messages", map[string]any{"message": steer}, &got); code != http.StatusAccepted ||
		got.Status != "running" || got.Turn != 1 {
		t.Fatalf("steer: %d %+v", code, got)
	}
	// Release the tool: the file appears in the sandbox's workspace.
	ctr, err := exec.Command("docker", "ps", "-q", "--filter", "label=io.agentbox.job="+j.JobID).Output()
	if err != nil || len(strings.Fields(string(ctr))) != 1 {
		t.Fatalf("the job's sandbox: %q %v", ctr, err)
	}
	if out, err := exec.Command("docker", "exec", strings.TrimSpace(string(ctr)), "touch", "/workspace/go").CombinedOutput(); err != nil {
		t.Fatalf("docker exec: %v: %s", err, out)
	}
	if end := s.awaitFinal([]string{j.JobID})[j.JobID]; end.Status != "complete" {
		t.Fatalf("job %+v\n%s", end, s.logs)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model was asked %d times, want 2", len(reqs))
	}
	msgs := reqs[1].Messages
	last := msgs[len(msgs)-1].Content
	if len(last) != 2 || last[0].Type != llm.BlockToolResult || !strings.Contains(last[0].Text, "released") || last[1].Text != steer {
		t.Errorf("the second request ends with %+v; want the tool's result, then the message", last)
	}
}

// TestReplyNeedsTheModelAgent: a server running the shell agent refuses
// follow-ups with a 400 that says why.
func TestReplyNeedsTheModelAgent(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.start()
	id, _ := s.submit("true")
	s.awaitFinal([]string{id})
	var e wire.ErrorResponse
	if code := s.do("POST", "/v1/jobs/"+id+"/messages", map[string]any{"message": "more"}, &e); code != http.StatusBadRequest ||
		!strings.Contains(e.Error.Message, "follow-up messages need the model agent") {
		t.Errorf("reply to a shell job: %d %+v", code, e)
	}
}

// useCLI points the in-process CLI at the server.
func (s *server) useCLI(t *testing.T) {
	t.Setenv("AGENTBOX_URL", s.url)
	t.Setenv("AGENTBOX_TOKEN", testToken)
	t.Setenv("AGENTBOX_DATA_DIR", t.TempDir())
}

// postRaw posts body, as is, as a message to job id and returns the status.
func (s *server) postRaw(id, body string) int {
	req, _ := http.NewRequest("POST", s.url+"/v1/jobs/"+id+"/messages", bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func hasToolUse(msgs []llm.Message, name string) bool {
	for _, m := range msgs {
		for _, b := range m.ToolUses() {
			if b.Name == name {
				return true
			}
		}
	}
	return false
}

// kindOf names an event by its type, and a state event by its status too.
func kindOf(ev eventDTO) string {
	if ev.Type != "state" {
		return ev.Type
	}
	var p struct{ Status string }
	json.Unmarshal(ev.Payload, &p)
	return "state:" + p.Status
}
