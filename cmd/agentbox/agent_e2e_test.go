package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/llm/llmtest"
)

// modelServer runs `agentbox serve` with the agent talking to a scripted
// model in the given wire format over real HTTP.
func modelServer(t *testing.T, format string, script llmtest.Script, extraEnv ...string) (*server, *llmtest.Server) {
	t.Helper()
	s, fake := newModelServer(t, format, script, extraEnv...)
	s.start()
	return s, fake
}

// newModelServer prepares what modelServer starts.
func newModelServer(t *testing.T, format string, script llmtest.Script, extraEnv ...string) (*server, *llmtest.Server) {
	t.Helper()
	fake := llmtest.New(t, script)
	env := append([]string{"AGENTBOX_AGENT=model", "AGENTBOX_CONCURRENCY=1"}, extraEnv...)
	switch format {
	case "anthropic":
		env = append(env, "ANTHROPIC_API_KEY=test-key", "ANTHROPIC_BASE_URL="+fake.AnthropicURL(), "AGENTBOX_MODEL=anthropic:claude-sonnet-4-5")
	case "openai":
		env = append(env, "OPENAI_API_KEY=test-key", "OPENAI_BASE_URL="+fake.OpenAIURL(), "AGENTBOX_MODEL=openai:gpt-4.1")
	}
	return newServer(t, env...), fake // extra env comes after newServer's defaults, so it wins
}

// runJob submits a task and waits for its end.
func (s *server) runJob(t *testing.T, task string, limits map[string]any) jobDTO {
	t.Helper()
	body := map[string]any{"task": task}
	if limits != nil {
		body["limits"] = limits
	}
	var j jobDTO
	if code := s.do("POST", "/v1/jobs", body, &j); code != 201 {
		t.Fatalf("submit: %d\n%s", code, s.logs)
	}
	return s.awaitFinal([]string{j.JobID})[j.JobID]
}

type eventDTO struct {
	Seq     int64           `json:"seq"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// events reads the job's whole log, page by page.
func (s *server) events(id string) []eventDTO {
	var all []eventDTO
	for {
		var page struct {
			Events []eventDTO `json:"events"`
		}
		s.do("GET", fmt.Sprintf("/v1/jobs/%s/events?limit=1000&after=%d", id, len(all)), nil, &page)
		if len(page.Events) == 0 {
			return all
		}
		all = append(all, page.Events...)
	}
}

// toolResults returns the texts of the job's tool results, and which failed.
func (s *server) toolResults(id string) (texts []string, failed []bool) {
	for _, ev := range s.events(id) {
		if ev.Type != "tool_result" {
			continue
		}
		var p struct {
			Text    string `json:"text"`
			IsError bool   `json:"is_error"`
		}
		json.Unmarshal(ev.Payload, &p)
		texts, failed = append(texts, p.Text), append(failed, p.IsError)
	}
	return texts, failed
}

func (s *server) zipFiles(t *testing.T, id string) map[string]string {
	t.Helper()
	b := s.get(t, "/v1/jobs/"+id+"/artifacts.zip", 200)
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range zr.File {
		rc, _ := f.Open()
		var buf bytes.Buffer
		buf.ReadFrom(rc)
		rc.Close()
		files[f.Name] = buf.String()
	}
	return files
}

func step(turns ...llmtest.Turn) llmtest.Step { return llmtest.Step{Branches: turns} }

func when(contains string, t llmtest.Turn) llmtest.Turn {
	t.When = &llmtest.Match{ResultContains: contains}
	return t
}

func helloScript() llmtest.Script {
	return llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("write_file", map[string]any{"path": "hello.py", "content": "print(\"Hello, World!\")\n"})),
		step(llmtest.Call("bash", map[string]any{"command": "python3 hello.py"})),
		step(when("Hello, World!", llmtest.Call("finish", map[string]any{"summary": "hello.py prints Hello, World!"})),
			llmtest.Call("finish", map[string]any{"summary": "it did not print"})),
	}}
}

func TestAgentHelloWorldBothFormats(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"anthropic", "openai"} {
		t.Run(format, func(t *testing.T) {
			s, fake := modelServer(t, format, helloScript())
			j := s.runJob(t, "Create a Python script that prints Hello, World!", nil)
			if j.Status != "complete" {
				t.Fatalf("job %+v\n%s", j, s.logs)
			}
			if f := s.zipFiles(t, j.JobID); f["hello.py"] != "print(\"Hello, World!\")\n" {
				t.Errorf("zip files %v", f)
			}
			texts, _ := s.toolResults(j.JobID)
			if len(texts) != 3 || !strings.Contains(texts[1], "Hello, World!") {
				t.Errorf("tool results %q", texts)
			}
			reqs := fake.Requests()
			if len(reqs) != 3 || !reqs[0].Stream || reqs[0].Format != format {
				t.Errorf("model saw %d requests (stream %v, format %s)", len(reqs), len(reqs) > 0 && reqs[0].Stream, format)
			}
			var full jobDTO
			s.do("GET", "/v1/jobs/"+j.JobID, nil, &full)
			if full.Steps != 3 {
				t.Errorf("steps %d, want 3", full.Steps)
			}
		})
	}
}

func TestAgentHTTPServerInSandbox(t *testing.T) {
	t.Parallel()
	app := "from http.server import BaseHTTPRequestHandler, HTTPServer\n" +
		"class H(BaseHTTPRequestHandler):\n" +
		"    def do_GET(self):\n" +
		"        self.send_response(200 if self.path == '/health' else 404)\n" +
		"        self.send_header('Content-Type', 'application/json'); self.end_headers()\n" +
		"        self.wfile.write(b'{\"status\": \"ok\"}')\n" +
		"HTTPServer(('127.0.0.1', 8000), H).serve_forever()\n"
	test := "for i in $(seq 300); do curl -s localhost:8000/health && exit 0; sleep 0.1; done; exit 1"
	s, _ := modelServer(t, "anthropic", llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("write_file", map[string]any{"path": "app.py", "content": app})),
		step(llmtest.Call("bash", map[string]any{"command": "python3 app.py > server.log 2>&1 &"})),
		step(llmtest.Call("bash", map[string]any{"command": test})),
		step(when(`{"status": "ok"}`, llmtest.Call("finish", map[string]any{"summary": "/health answers ok"})),
			llmtest.Call("finish", map[string]any{"summary": "FAILED"})),
	}})
	j := s.runJob(t, `Create a small HTTP API with /health returning {"status": "ok"}, and test it`, nil)
	var full struct {
		jobDTO
		Result string `json:"result"`
	}
	s.do("GET", "/v1/jobs/"+j.JobID, nil, &full)
	if j.Status != "complete" || full.Result != "/health answers ok" {
		texts, _ := s.toolResults(j.JobID)
		t.Fatalf("job %s result %q; tool results %q", j.Status, full.Result, texts)
	}
}

func TestAgentCSVWithTests(t *testing.T) {
	t.Parallel()
	filter := "import csv, sys\n" +
		"def keep(rows):\n    return [r for r in rows if float(r['value']) > 100]\n" +
		"if __name__ == '__main__':\n" +
		"    rows = list(csv.DictReader(open('data.csv')))\n" +
		"    w = csv.DictWriter(open('out.csv', 'w', newline=''), fieldnames=['name', 'value'])\n" +
		"    w.writeheader(); w.writerows(keep(rows))\n"
	tests := "from filter import keep\n" +
		"def test_keeps_over_100():\n    assert keep([{'name': 'a', 'value': '150'}, {'name': 'b', 'value': '50'}]) == [{'name': 'a', 'value': '150'}]\n"
	s, _ := modelServer(t, "openai", llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("write_file", map[string]any{"path": "data.csv", "content": "name,value\na,150\nb,50\nc,101\n"})),
		step(llmtest.Call("write_file", map[string]any{"path": "filter.py", "content": filter})),
		step(llmtest.Call("write_file", map[string]any{"path": "test_filter.py", "content": tests})),
		step(llmtest.Call("bash", map[string]any{"command": "python3 -m pytest -q && python3 filter.py"})),
		step(when("1 passed", llmtest.Call("finish", map[string]any{"summary": "out.csv written, tests pass"})),
			llmtest.Call("finish", map[string]any{"summary": "FAILED"})),
	}})
	j := s.runJob(t, "Read a CSV, keep the rows whose value is over 100, write a new CSV, with tests", nil)
	files := s.zipFiles(t, j.JobID)
	if j.Status != "complete" || strings.ReplaceAll(files["out.csv"], "\r", "") != "name,value\na,150\nc,101\n" {
		texts, _ := s.toolResults(j.JobID)
		t.Fatalf("job %s, out.csv %q; results %q", j.Status, files["out.csv"], texts)
	}
}

func TestAgentFixesItsSyntaxError(t *testing.T) {
	t.Parallel()
	s, _ := modelServer(t, "anthropic", llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("write_file", map[string]any{"path": "calc.py", "content": "print(6 * 7\n"})),
		step(llmtest.Call("bash", map[string]any{"command": "python3 calc.py"})),
		step(when("SyntaxError", llmtest.Call("edit_file", map[string]any{"path": "calc.py", "old_string": "print(6 * 7", "new_string": "print(6 * 7)"})),
			llmtest.Call("finish", map[string]any{"summary": "NO ERROR SEEN"})),
		step(llmtest.Call("bash", map[string]any{"command": "python3 calc.py"})),
		step(when("42", llmtest.Call("finish", map[string]any{"summary": "fixed the syntax error; prints 42"})),
			llmtest.Call("finish", map[string]any{"summary": "FAILED"})),
	}})
	j := s.runJob(t, "Write calc.py that prints 6*7", nil)
	texts, failed := s.toolResults(j.JobID)
	if j.Status != "complete" || len(texts) != 5 {
		t.Fatalf("job %s, results %q", j.Status, texts)
	}
	if !failed[1] || !strings.Contains(texts[1], "SyntaxError") || failed[3] || !strings.Contains(texts[3], "42") {
		t.Errorf("the error and the fix are not in the events: %q %v", texts, failed)
	}
}

func TestAgentStopsAtMaxSteps(t *testing.T) {
	t.Parallel()
	s, fake := modelServer(t, "anthropic", llmtest.Script{Steps: []llmtest.Step{
		{Branches: []llmtest.Turn{llmtest.Call("bash", map[string]any{"command": "echo still working"})}, Repeat: true},
	}})
	j := s.runJob(t, "Never finish", map[string]any{"max_steps": 4})
	if j.Status != "error" || !strings.Contains(j.Error, "stopped after 4 steps") || !strings.Contains(j.Error, "max_steps") {
		t.Fatalf("job %s: %q", j.Status, j.Error)
	}
	if n := len(fake.Requests()); n != 4 {
		t.Errorf("model called %d times, want 4", n)
	}
}

func TestJobModelOverridesServerDefault(t *testing.T) {
	t.Parallel()
	fake := llmtest.New(t, helloScript())
	s := newServer(t, "AGENTBOX_AGENT=model", "AGENTBOX_CONCURRENCY=1",
		"ANTHROPIC_API_KEY=test-key", "ANTHROPIC_BASE_URL="+fake.AnthropicURL(), "AGENTBOX_MODEL=anthropic:claude-sonnet-4-5",
		"OPENAI_API_KEY=test-key", "OPENAI_BASE_URL="+fake.OpenAIURL())
	s.start()
	var j jobDTO
	if code := s.do("POST", "/v1/jobs", map[string]any{"task": "hello", "model": "openai:gpt-4.1-mini"}, &j); code != 201 {
		t.Fatalf("submit: %d", code)
	}
	if got := s.awaitFinal([]string{j.JobID})[j.JobID]; got.Status != "complete" {
		t.Fatalf("job %+v", got)
	}
	for _, r := range fake.Requests() {
		if r.Format != "openai" || r.Model != "gpt-4.1-mini" {
			t.Errorf("request in format %s for model %s, want openai gpt-4.1-mini", r.Format, r.Model)
		}
	}
	if code := s.do("POST", "/v1/jobs", map[string]any{"task": "x", "model": "gpt-4"}, nil); code != 422 {
		t.Errorf("a model without provider: %d, want 422", code)
	}
}

func TestAgentResumesAfterKill9(t *testing.T) {
	t.Parallel()
	for _, isolation := range []string{"container", "gvisor", "microvm"} {
		t.Run(isolation, func(t *testing.T) { t.Parallel(); agentResumesAfterKill9(t, isolation) })
	}
}

// agentResumesAfterKill9: a job's server killed -9 mid-job; the restarted
// server resumes the job under the same tier: in the same sandbox for the
// container tiers, in a new VM on the saved workspace for microvm (a VM
// dies with the server that started it).
func agentResumesAfterKill9(t *testing.T, isolation string) {
	needTier(t, isolation)
	loop := "if [ -e stop ]; then echo STOP; else sleep 0.3; echo go; fi"
	s, fake := modelServer(t, "anthropic", llmtest.Script{Steps: []llmtest.Step{{Repeat: true, Branches: []llmtest.Turn{
		when("STOP", llmtest.Call("finish", map[string]any{"summary": "stopped when asked"})),
		llmtest.Call("bash", map[string]any{"command": loop}),
	}}}}, "AGENTBOX_ISOLATION="+isolation)
	var j jobDTO
	if code := s.do("POST", "/v1/jobs", map[string]any{"task": "work until the stop file appears"}, &j); code != 201 {
		t.Fatalf("submit: %d", code)
	}
	waitUntil(t, time.Minute, func() bool { return countType(s.events(j.JobID), "tool_result") >= 3 })
	s.cmd.Process.Signal(syscall.SIGKILL)
	s.cmd.Wait()
	before := len(fake.Requests())

	s.start()
	waitUntil(t, time.Minute, func() bool { return len(fake.Requests()) > before+1 }) // it is working again
	// The running sandbox sees its loop disk (as root) or the workspace.
	disks, _ := filepath.Glob(filepath.Join(s.dataDir, "*", "*", "disk"))
	for _, dir := range append(disks, filepath.Join(s.dataDir, "workspaces", j.JobID)) {
		os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644)
	}
	final := s.awaitFinal([]string{j.JobID})[j.JobID]
	if final.Status != "complete" || final.Attempts != 2 || final.Isolation != isolation {
		t.Fatalf("job %+v\n%s", final, s.logs)
	}
	evs := s.events(j.JobID)
	step, resumed, recovered := 0, false, false
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: the log has a gap", i, ev.Seq)
		}
		var p struct {
			Step      int    `json:"step"`
			Text      string `json:"text"`
			Recovered bool   `json:"recovered"`
		}
		json.Unmarshal(ev.Payload, &p)
		switch ev.Type {
		case "model":
			if p.Step != step+1 {
				t.Errorf("model step %d after step %d: a gap or a repeat", p.Step, step)
			}
			step = p.Step
		case "notice":
			resumed = resumed || strings.Contains(p.Text, "resumed after a restart")
		case "sandbox":
			recovered = recovered || p.Recovered
		}
	}
	if sameSandbox := isolation != "microvm"; !resumed || recovered != sameSandbox {
		t.Errorf("resumed notice %v, same sandbox %v (want %v)", resumed, recovered, sameSandbox)
	}
	if final.Steps != step {
		t.Errorf("the job counts %d steps, its log holds %d: steps counted twice across the restart", final.Steps, step)
	}
	// The first request after the restart carried the conversation so far.
	if r := fake.Requests()[before]; len(r.Messages) < 5 {
		t.Errorf("the resumed job sent %d messages; its history was lost", len(r.Messages))
	}
	waitUntil(t, time.Minute, func() bool { return s.sandboxes() == 0 })
}

func countType(evs []eventDTO, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}
