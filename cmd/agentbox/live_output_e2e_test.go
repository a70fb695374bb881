package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/llm/llmtest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// sseEvent is one event of GET /v1/jobs/{id}/events as text/event-stream,
// with when it arrived.
type sseEvent struct {
	eventDTO
	at time.Time
}

// follow reads the job's SSE stream, giving each event to see as it
// arrives, until see returns false or the stream ends.
func (s *server) follow(t *testing.T, ctx context.Context, id string, see func(sseEvent) bool) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+"/v1/jobs/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("events stream: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		ev := sseEvent{at: time.Now()}
		if err := json.Unmarshal([]byte(data), &ev.eventDTO); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		if !see(ev) {
			return
		}
	}
}

// outputPayload is an output event's payload.
type outputPayload struct {
	Call   string `json:"call"`
	Stream string `json:"stream"`
	Text   string `json:"text"`
}

const countdown = "for i in $(seq 1 20); do echo line $i; sleep 1; done"

// TestLiveOutputReachesSSE: a 20-second command's first line reaches an
// SSE client as an output event naming its call at least 10 s before the
// step's result.
func TestLiveOutputReachesSSE(t *testing.T) {
	t.Parallel()
	s, _ := modelServer(t, "anthropic", llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("bash", map[string]any{"command": countdown, "timeout_seconds": 60})),
		step(llmtest.Call("finish", map[string]any{"summary": "counted"})),
	}})
	id, code := s.submit("count to 20")
	if code != 201 {
		t.Fatalf("submit: %d\n%s", code, s.logs)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var call string
	var first, result time.Time
	var lines []string
	s.follow(t, ctx, id, func(ev sseEvent) bool {
		switch ev.Type {
		case "tool_call":
			var p struct{ ID, Name string }
			json.Unmarshal(ev.Payload, &p)
			if p.Name == "bash" {
				call = p.ID
			}
		case "output":
			var p outputPayload
			json.Unmarshal(ev.Payload, &p)
			if p.Call != call || call == "" {
				t.Errorf("an output event names call %q; the bash call is %q", p.Call, call)
			}
			if first.IsZero() && strings.Contains(p.Text, "line 1\n") {
				first = ev.at
			}
			lines = append(lines, strings.Fields(p.Text)...)
		case "tool_result":
			if result.IsZero() {
				result = ev.at
			}
		}
		return true
	})
	if first.IsZero() || result.IsZero() {
		t.Fatalf("no output event with line 1 (%v) or no tool result (%v)\n%s", first, result, s.logs)
	}
	if ahead := result.Sub(first); ahead < 10*time.Second {
		t.Errorf("the first line came %v before the step's result; want at least 10s", ahead)
	} else {
		t.Logf("the first line came %v before the step's result", ahead)
	}
	if n := strings.Count(strings.Join(lines, " "), "line"); n != 20 {
		t.Errorf("%d lines in the output events; want 20", n)
	}
	if j := s.job(id); j.Status != "complete" {
		t.Errorf("job %s", j.Status)
	}
}

// TestLiveOutputInRun: `agentbox run` shows a 20-second command's first
// line under its step at least 10 s before it ends.
func TestLiveOutputInRun(t *testing.T) {
	sandboxEnv(t)
	useModel(t, llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("bash", map[string]any{"command": countdown, "timeout_seconds": 60})),
		step(llmtest.Call("finish", map[string]any{"summary": "counted"})),
	}})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, guestBinary, "run", "count to 20")
	cmd.Env = os.Environ()
	var errOut strings.Builder
	cmd.Stderr = &errOut
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var first, summary time.Time
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		l := sc.Text()
		out.WriteString(l + "\n")
		if first.IsZero() && l == "  │ line 1" {
			first = time.Now()
		}
		if strings.HasPrefix(l, "  ✓ exit 0") {
			summary = time.Now()
		}
	}
	err = cmd.Wait()
	end := time.Now()
	if err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	if first.IsZero() || summary.IsZero() {
		t.Fatalf("stdout lacks the first line or the step's result line:\n%s", out.String())
	}
	if ahead := end.Sub(first); ahead < 10*time.Second {
		t.Errorf("the first line came %v before run ended; want at least 10s", ahead)
	} else {
		t.Logf("the first line came %v before the step's result line, %v before run ended", summary.Sub(first), ahead)
	}
	if strings.Count(out.String(), "  │ line ") != 20 || strings.Contains(out.String(), "<stdout>") {
		t.Errorf("stdout is not the 20 lines once each, without tags:\n%s", out.String())
	}
}

// TestTimedOutStepKeepsItsOutput: a command cut by its own timeout and one
// cut by the job's timeout keep the output they had, and say why in plain
// words, in the result the model sees and in run's display, with no words
// of the guest's transport.
func TestTimedOutStepKeepsItsOutput(t *testing.T) {
	sandboxEnv(t)
	fake := useModel(t, llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("bash", map[string]any{"command": "echo start; sleep 30", "timeout_seconds": 2})),
		step(llmtest.Call("finish", map[string]any{"summary": "done"})),
	}})
	out, errOut, err := run(t.Context(), "run", "try it")
	if err != nil {
		t.Fatalf("run: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	reqs := fake.Requests()
	if len(reqs) < 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	var result string
	for _, m := range reqs[1].Messages {
		for _, b := range m.Content {
			if b.Type == "tool_result" {
				result = b.Text
			}
		}
	}
	for _, want := range []string{"<stdout>\nstart\n</stdout>", "timed out after 2s"} {
		if !strings.Contains(result, want) {
			t.Errorf("the result the model saw lacks %q:\n%s", want, result)
		}
	}
	if !strings.Contains(out, "  │ start\n") || !strings.Contains(out, "timed out after 2s") {
		t.Errorf("run's display lacks the output or why it stopped:\n%s", out)
	}
	noTransport(t, result+out+errOut)

	// The job's own timeout cuts the step: the output stays, and why.
	useModel(t, llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("bash", map[string]any{"command": "echo start; sleep 60", "timeout_seconds": 120})),
	}})
	out, errOut, _ = run(t.Context(), "run", "--timeout", "8s", "try it")
	if !strings.Contains(out, "  │ start\n") || !strings.Contains(out, "✗ not completed: job timed out after 8s") {
		t.Errorf("run's display of a step the job's timeout cut:\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}
	noTransport(t, out+errOut)
}

// noTransport fails when text carries the guest transport's words.
func noTransport(t *testing.T, text string) {
	t.Helper()
	for _, bad := range []string{"guest POST", "/exec", "exec stream"} {
		if strings.Contains(text, bad) {
			t.Errorf("transport text %q shown:\n%s", bad, text)
		}
	}
}

// TestLiveOutputLatency measures how long a line a command writes takes to
// reach an SSE client: each line is the sandbox's clock (date +%s%N) when
// written, against the host's when the client reads it (one kernel's
// clock on the container tier). Sparse lines (4 a second) and dense ones
// (50 a second, batched) are timed apart. It fails only when the median
// of the sparse lines passes 500 ms; docs/benchmarks.md has its numbers.
func TestLiveOutputLatency(t *testing.T) {
	const sparse, dense = "for i in $(seq 60); do date +%s%N; sleep 0.25; done", "for i in $(seq 200); do date +%s%N; sleep 0.02; done"
	s, _ := modelServer(t, "anthropic", llmtest.Script{Steps: []llmtest.Step{
		step(llmtest.Call("bash", map[string]any{"command": sparse})),
		step(llmtest.Call("bash", map[string]any{"command": dense})),
		step(llmtest.Call("finish", map[string]any{"summary": "timed"})),
	}})
	id, code := s.submit("time the output")
	if code != 201 {
		t.Fatalf("submit: %d", code)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var lat [2][]time.Duration
	calls := -1
	s.follow(t, ctx, id, func(ev sseEvent) bool {
		switch ev.Type {
		case "tool_call":
			calls++
		case "output":
			var p outputPayload
			json.Unmarshal(ev.Payload, &p)
			for _, f := range strings.Fields(p.Text) {
				if ns, err := strconv.ParseInt(f, 10, 64); err == nil && calls >= 0 && calls < 2 {
					lat[calls] = append(lat[calls], ev.at.Sub(time.Unix(0, ns)))
				}
			}
		}
		return true
	})
	for i, name := range []string{"sparse (every 250 ms)", "dense (every 20 ms)"} {
		d := lat[i]
		if len(d) < 50 {
			t.Fatalf("%s: %d lines timed; want at least 50\n%s", name, len(d), s.logs)
		}
		slices.Sort(d)
		p50, p95 := d[len(d)/2], d[len(d)*95/100]
		t.Logf("live output latency, %s: %d lines, p50 %v, p95 %v, max %v", name, len(d), p50.Round(time.Millisecond), p95.Round(time.Millisecond), d[len(d)-1].Round(time.Millisecond))
		if i == 0 && p50 > 500*time.Millisecond {
			t.Errorf("%s: p50 %v; want well under 500ms (goal 100ms)", name, p50)
		}
	}
}

// TestTerminalShowsOutputAsItRuns: in a terminal, chat and run show a
// running command's first line under its step before the step ends, with
// the same status line below it: what runs and for how long.
func TestTerminalShowsOutputAsItRuns(t *testing.T) {
	sandboxEnv(t)
	const command = "echo first; sleep 12; echo second"
	running := func(s string) bool {
		return strings.Contains(s, "│ first") && regexp.MustCompile(`running bash · \d+s`).MatchString(s)
	}
	midStep := func(t *testing.T, screen string) {
		t.Helper()
		if strings.Contains(screen, "│ second") || strings.Contains(screen, "exit 0") {
			t.Errorf("the screen was read after the step ended:\n%s", screen)
		}
		noEscapes(t, screen)
	}
	t.Run("chat", func(t *testing.T) {
		useModel(t, llmtest.Script{Steps: []llmtest.Step{
			step(llmtest.Call("bash", map[string]any{"command": command})),
			step(llmtest.Say("Counted.")),
		}})
		tty := testenv.StartTmux(t, 120, 40, nil, guestBinary, "chat", "--session", "live")
		tty.WaitFor("the prompt", time.Minute, atPrompt)
		tty.Type("go")
		tty.Keys("Enter")
		midStep(t, tty.WaitFor("the first line and the status line", time.Minute, running))
		screen := tty.WaitFor("the turn's end", time.Minute, func(s string) bool { return strings.Contains(s, "Counted.") && atPrompt(s) })
		if !strings.Contains(screen, "│ second") || !strings.Contains(screen, "✓ exit 0 (success)") {
			t.Errorf("the step's end:\n%s", screen)
		}
		tty.Keys("C-d")
		tty.WaitFor("chat to leave", 30*time.Second, func(string) bool { _, done := tty.Exited(); return done })
	})
	t.Run("run", func(t *testing.T) {
		useModel(t, llmtest.Script{Steps: []llmtest.Step{
			step(llmtest.Call("bash", map[string]any{"command": command})),
			step(llmtest.Call("finish", map[string]any{"summary": "counted"})),
		}})
		tty := testenv.StartTmux(t, 120, 40, nil, guestBinary, "run", "count")
		midStep(t, tty.WaitFor("the first line and the status line", time.Minute, running))
		tty.WaitFor("run to end", time.Minute, func(string) bool { _, done := tty.Exited(); return done })
		if code, _ := tty.Exited(); code != 0 {
			t.Errorf("run exited %d:\n%s", code, tty.Screen())
		}
	})
}

// TestLiveOutputCapPerJob: a job stores at most AGENTBOX_LIVE_OUTPUT_MAX
// bytes of output events (as stored: the text's JSON, and 64 bytes an
// event), then one log event says so.
func TestLiveOutputCapPerJob(t *testing.T) {
	t.Parallel()
	s := newServer(t, "AGENTBOX_LIVE_OUTPUT_MAX=64k")
	s.start()
	id, code := s.submit("seq 1 100000; echo done >&2")
	if code != 201 {
		t.Fatalf("submit: %d", code)
	}
	if j := s.awaitFinal([]string{id})[id]; j.Status != "complete" {
		t.Fatalf("job %+v", j)
	}
	var stored int
	var logs []string
	for _, ev := range s.events(id) {
		switch ev.Type {
		case "output":
			var p outputPayload
			json.Unmarshal(ev.Payload, &p)
			text, _ := json.Marshal(p.Text)
			stored += len(text) - 2 + 64
		case "log":
			var p struct{ Message string }
			json.Unmarshal(ev.Payload, &p)
			logs = append(logs, p.Message)
		}
	}
	if stored > 64<<10 || stored < 64<<10-64 {
		t.Errorf("%d bytes of output events stored; want the cap, 65536", stored)
	}
	if len(logs) != 1 || !strings.Contains(logs[0], "more than 65536 bytes of output") {
		t.Errorf("log events %q; want one saying the output passed the cap", logs)
	}
}
