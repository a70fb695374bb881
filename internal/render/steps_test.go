package render

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestSteps: how `agentbox logs` shows each type of event, stdout and
// stderr, from the payloads as the log stores them.
func TestSteps(t *testing.T) {
	tests := []struct {
		typ, payload string
		out, errw    string
	}{
		{"state", `{"status":"pending"}`, "", "[pending]\n"},
		{"state", `{"attempt":2,"status":"running","worker":"w1"}`, "", "[running] attempt 2\n"},
		{"state", `{"error":"boom","status":"error"}`, "", "[error] boom\n"},
		{"sandbox", `{"ready_ms":812,"recovered":false,"sandbox_id":"sb_1"}`, "", "[sandbox sb_1 ready in 812ms]\n"},
		{"command", `{"command":"echo hi\nls"}`, "", "$ echo hi…\n"},
		{"output", `{"stream":"stdout","text":"hi\u001b[2J\n"}`, "hi[2J\n", ""},
		{"exit", `{"duration_ms":3001,"exit_code":137,"oom_killed":true,"timed_out":true,"truncated":true}`, "",
			"[exit 137 after 3001ms, timed out, output truncated]\n"},
		{"exit", `{"duration_ms":12,"exit_code":0}`, "", "[exit 0 after 12ms]\n"},
		{"log", `{"message":"after the end"}`, "", "[log] after the end\n"},
		{"log", `{"level":"warn","message":"slow"}`, "", "[warn] slow\n"},
		{"git", `{"action":"clone","branch":"agentbox/job_1","commit":"0123456789abcdef0123","ref":"main","url":"https://h/r.git"}`, "",
			"[git clone https://h/r.git ref main branch agentbox/job_1 0123456789ab]\n"},
		{"git", `{"action":"clone","error":"git clone: fatal: repository not found\nmore","url":"https://h/r.git"}`, "",
			"[git clone https://h/r.git failed: git clone: fatal: repository not found…]\n"},
		{"git", `{"action":"snapshot","commit":"fedcba9876543210"}`, "", "[git snapshot fedcba987654]\n"},
		{"checkpoint", `{"bytes":5000,"files":120,"ms":12,"step":3,"tree":"workspace","uploaded":1,"uploaded_bytes":40}`, "",
			"[checkpoint workspace step 3: 120 files, 1 uploaded, 12ms]\n"},
		{"checkpoint", `{"bytes":0,"error":"put blob: disk full","files":0,"ms":3,"step":2,"tree":"git","uploaded":0,"uploaded_bytes":0}`, "",
			"[checkpoint git step 2 failed: put blob: disk full]\n"},
		{"deleted", `{"reason":"api"}`, "", "[deleted] {\"reason\":\"api\"}\n"},
		{"model", `{"duration_ms":5,"message":{"role":"assistant","content":[{"type":"text","text":" Looking. "},{"type":"tool_use","id":"a","name":"bash","input":{}}]},"step":1,"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":2,"cache_read_tokens":0,"cache_write_tokens":0}}`,
			"Looking.\n", ""},
		{"model", `{"message":{"role":"assistant","content":[]},"step":2}`, "", ""},
		{"tool_call", `{"id":"a","input":{"path":"a.txt","content":"x < y"},"name":"write_file","step":1}`, "",
			"▶ write a.txt\n  +x < y\n"},
		{"tool_result", `{"duration_ms":4,"id":"a","images":0,"is_error":false,"name":"bash","step":1,"text":"one\ntwo\n"}`, "  │ one\n  │ two\n", ""},
		{"tool_result", `{"id":"a","is_error":true,"name":"bash","step":1,"text":"no such file"}`, "  ✗ no such file\n", ""},
		{"notice", `{"said":true,"step":3,"text":"go on"}`, "", "[agentbox] go on\n"},
		{"condensation", `{"from_step":1,"kind":"mask","reason":"","state":{"condensed_steps":0,"dropped_steps":0,"masked_steps":2},"step":5,"to_step":2,"tokens_after":10,"tokens_before":20}`, "",
			"[condensation] {\"from_step\":1,\"kind\":\"mask\",\"reason\":\"\",\"state\":{\"condensed_steps\":0,\"dropped_steps\":0,\"masked_steps\":2},\"step\":5,\"to_step\":2,\"tokens_after\":10,\"tokens_before\":20}\n"},
		{"from_the_future", `{"x":1}`, "", "[from_the_future] {\"x\":1}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			var out, errw bytes.Buffer
			p := NewSteps(&out, &errw)
			if err := p.Show(tt.typ, json.RawMessage(tt.payload)); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.out || errw.String() != tt.errw {
				t.Errorf("show(%s, %s):\n stdout %q, want %q\n stderr %q, want %q", tt.typ, tt.payload, out.String(), tt.out, errw.String(), tt.errw)
			}
		})
	}
}

// TestStepsDropControls: no field of an event reaches the terminal with
// its control characters, whatever the type (a model server's error
// body, a sandbox's message, a stored payload of an unknown type).
func TestStepsDropControls(t *testing.T) {
	const evil = "a\u001b]52;c;aGk=\u0007b\u009b2Jc\u001b[1A"
	q, _ := json.Marshal(evil)
	s := string(q)
	for _, ev := range []struct{ typ, payload string }{
		{"notice", `{"step":1,"text":` + s + `}`},
		{"state", `{"status":` + s + `,"error":` + s + `}`},
		{"command", `{"command":` + s + `}`},
		{"log", `{"level":` + s + `,"message":` + s + `}`},
		{"sandbox", `{"sandbox_id":` + s + `}`},
		{"checkpoint", `{"tree":` + s + `,"error":` + s + `,"step":1}`},
		{"exotic", `{"x":` + s + `}`},
		{"exotic", "{\"x\":\"raw \u009b2J \x1b[2J\"}"},
	} {
		var out, errw bytes.Buffer
		if err := NewSteps(&out, &errw).Show(ev.typ, json.RawMessage(ev.payload)); err != nil {
			t.Fatal(err)
		}
		if got := out.String() + errw.String(); bytes.ContainsAny([]byte(got), "\x1b\x07\u009b") {
			t.Errorf("%s: shown as %q", ev.typ, got)
		}
	}
	var errw bytes.Buffer
	_ = NewSteps(&errw, &errw).Note("agentbox: anthropic: 500: " + evil)
	if bytes.ContainsAny(errw.Bytes(), "\x1b\x07\u009b") {
		t.Errorf("a note shown as %q", errw.String())
	}
}

// TestStepsDropBidiOverrides: a command shown with a right-to-left
// override reads as something else than it runs ("Trojan Source").
func TestStepsDropBidiOverrides(t *testing.T) {
	cmd := "echo ok \u202e; rm -rf ~ \u202c\u2066x\u2069 שלום"
	in, _ := json.Marshal(map[string]string{"command": cmd})
	var out, errw bytes.Buffer
	if err := NewSteps(&out, &errw).Show("tool_call", json.RawMessage(`{"name":"bash","input":`+string(in)+`}`)); err != nil {
		t.Fatal(err)
	}
	if got, want := errw.String(), "$ echo ok ; rm -rf ~ x שלום\n"; got != want {
		t.Errorf("shown as %q, want %q", got, want)
	}
}
