package event_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/llm"
	"github.com/agentbox/agentbox/internal/memory"
	"github.com/agentbox/agentbox/internal/store"
)

var (
	message = llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{
		{Type: llm.BlockText, Text: "<looking> & listing"},
		{Type: llm.BlockToolUse, ID: "toolu_1", Name: "bash", Input: json.RawMessage(`{"command":"ls"}`)},
		{Type: llm.BlockImage, Images: []llm.Image{{MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}}}},
	}}
	usage = llm.Usage{InputTokens: 1200, OutputTokens: 34, CacheReadTokens: 1000, CacheWriteTokens: 5}
	state = memory.State{Summary: "did things", CondensedSteps: 4, DroppedSteps: 1, MaskedSteps: 6}
)

// legacy pairs each payload as jobs and agent now write it with the map
// the same writer built before package event: the stored JSON must not
// change, byte for byte, so old logs and new ones read the same.
var legacy = []struct {
	name string
	p    event.Payload
	old  any
}{
	{"state pending", event.State{Status: store.StatusPending}, map[string]any{"status": store.StatusPending}},
	{"state running", event.State{Status: store.StatusRunning, Attempt: 2, Worker: "w1"},
		map[string]any{"status": store.StatusRunning, "attempt": 2, "worker": "w1"}},
	{"state ended", event.State{Status: store.StatusError, Error: "boom"}, map[string]any{"status": store.StatusError, "error": "boom"}},
	{"state released", event.State{Status: store.StatusPending, Reason: "server shut down"},
		map[string]any{"status": store.StatusPending, "reason": "server shut down"}},
	{"state recovered", event.State{Status: store.StatusError, Error: "too many attempts", Reason: "lease expired"},
		map[string]any{"status": store.StatusError, "reason": "lease expired", "error": "too many attempts"}},
	{"sandbox", event.Sandbox{SandboxID: "sb_1", ReadyMS: 812, Recovered: true},
		map[string]any{"sandbox_id": "sb_1", "ready_ms": int64(812), "recovered": true}},
	{"sandbox new", event.Sandbox{SandboxID: "sb_2", ReadyMS: 0}, map[string]any{"sandbox_id": "sb_2", "ready_ms": int64(0), "recovered": false}},
	{"command", event.Command{Command: "echo <hi> && ls"}, map[string]any{"command": "echo <hi> && ls"}},
	{"output", event.Output{Stream: "stderr", Text: "ü\x00\n"}, map[string]any{"stream": "stderr", "text": "ü\x00\n"}},
	{"exit", event.Exit{ExitCode: 137, DurationMS: 3001, TimedOut: true, OOMKilled: true},
		map[string]any{"exit_code": 137, "duration_ms": int64(3001), "timed_out": true, "truncated": false, "oom_killed": true}},
	{"log", event.Log{Level: "warn", Message: "slow"}, map[string]any{"level": "warn", "message": "slow"}},
	{"deleted", event.Deleted{Reason: "retention"}, map[string]string{"reason": "retention"}},
	// git and message are new in issue 12: their "legacy" map is the JSON
	// the API documents, which a change of the struct must not change.
	{"git push failed", event.Git{Action: "push", Branch: "agentbox/j1", Commit: "c0ffee", Error: "denied"},
		map[string]any{"action": "push", "branch": "agentbox/j1", "commit": "c0ffee", "error": "denied"}},
	{"git clone", event.Git{Action: "clone", Ref: "main", URL: "https://example.com/o/r.git", Commit: "b0"},
		map[string]any{"action": "clone", "ref": "main", "url": "https://example.com/o/r.git", "commit": "b0"}},
	{"message", event.Message{Text: "now add a test", Turn: 2}, map[string]any{"text": "now add a test", "turn": 2}},
	// checkpoint is new in issue 14: its map is the JSON the API documents.
	{"checkpoint", event.Checkpoint{Tree: "workspace", Step: 3, Files: 120, Bytes: 5000, Uploaded: 1, UploadedBytes: 40, MS: 12},
		map[string]any{"tree": "workspace", "step": 3, "files": 120, "bytes": 5000, "uploaded": 1, "uploaded_bytes": 40, "ms": 12}},
	{"checkpoint failed", event.Checkpoint{Tree: "git", Step: 2, Error: "put blob: disk full"},
		map[string]any{"tree": "git", "step": 2, "files": 0, "bytes": 0, "uploaded": 0, "uploaded_bytes": 0, "ms": 0, "error": "put blob: disk full"}},
	// network and network_policy are new in issue 26.
	{"network", event.Network{Protocol: "connect", Host: "pypi.test", Port: 443, Addr: "203.0.113.7", Decision: "allow",
		Rule: "pypi.test", Reason: "allowed by pypi.test", BytesIn: 900, BytesOut: 120, DurationMS: 40},
		map[string]any{"protocol": "connect", "host": "pypi.test", "port": 443, "addr": "203.0.113.7", "decision": "allow",
			"rule": "pypi.test", "reason": "allowed by pypi.test", "bytes_in": 900, "bytes_out": 120, "duration_ms": 40}},
	{"network denied, repeated", event.Network{Protocol: "http", Host: "evil.test", Port: 80, Decision: "deny", Method: "GET", Path: "/x",
		Reason: "evil.test:80 is not in the job's allow list", Repeats: 7},
		map[string]any{"protocol": "http", "host": "evil.test", "port": 80, "decision": "deny", "method": "GET", "path": "/x",
			"reason": "evil.test:80 is not in the job's allow list", "repeats": 7, "bytes_in": 0, "bytes_out": 0, "duration_ms": 0}},
	{"network_policy", event.NetworkPolicy{By: "alice", Policy: json.RawMessage(`{"allow":["late.test"],"mode":"allow"}`)},
		map[string]any{"by": "alice", "policy": map[string]any{"mode": "allow", "allow": []any{"late.test"}}}},
	{"model", event.Model{Step: 3, Message: message, StopReason: "tool_use", Usage: usage, DurationMS: 950},
		map[string]any{"step": 3, "message": message, "stop_reason": "tool_use", "usage": usage, "duration_ms": int64(950)}},
	{"tool_call", event.ToolCall{Step: 3, ID: "toolu_1", Name: "bash", Input: json.RawMessage(`{"command": "ls"}`)},
		map[string]any{"step": 3, "id": "toolu_1", "name": "bash", "input": json.RawMessage(`{"command": "ls"}`)}},
	{"tool_result", event.ToolResult{Step: 3, ID: "toolu_1", Name: "bash", IsError: true, Text: "no such file", Images: 2, DurationMS: 40},
		map[string]any{"step": 3, "id": "toolu_1", "name": "bash", "is_error": true, "text": "no such file", "images": 2, "duration_ms": int64(40)}},
	{"notice", event.Notice{Step: 4, Text: "retrying"}, map[string]any{"step": 4, "text": "retrying"}},
	{"notice said", event.Notice{Step: 4, Text: "go on", Said: true}, map[string]any{"step": 4, "text": "go on", "said": true}},
	{"condensation", event.Condensation{Step: 9, Kind: memory.KindSummarize, FromStep: 1, ToStep: 4, TokensBefore: 9000, TokensAfter: 3000, State: state},
		map[string]any{"step": 9, "kind": memory.KindSummarize, "from_step": 1, "to_step": 4,
			"tokens_before": 9000, "tokens_after": 3000, "reason": "", "state": state}},
}

func TestPayloadsEncodeAsTheLegacyMaps(t *testing.T) {
	for _, tt := range legacy {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := json.Marshal(tt.old)
			if string(got) != string(want) {
				t.Errorf("payload\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestRoundTrip: every type, marshalled as writers store it, decodes to
// the value written, through Decode and As.
func TestRoundTrip(t *testing.T) {
	covered := map[string]bool{}
	for _, tt := range legacy {
		t.Run(tt.name, func(t *testing.T) {
			typ, b, err := event.Marshal(tt.p)
			if err != nil || typ != tt.p.EventType() {
				t.Fatalf("Marshal: %s %v", typ, err)
			}
			covered[typ] = true
			got, err := event.Decode(typ, b)
			if err != nil {
				t.Fatalf("Decode(%s, %s): %v", typ, b, err)
			}
			if !equalJSON(t, got, tt.p) || reflect.TypeOf(got) != reflect.TypeOf(tt.p) {
				t.Errorf("Decode(%s) = %#v, want %#v", typ, got, tt.p)
			}
			if _, ok := event.As[event.State](typ, b); ok != (typ == event.TypeState) {
				t.Errorf("As[State](%s) ok = %v", typ, ok)
			}
		})
	}
	for _, p := range event.Types() {
		if !covered[p.EventType()] {
			t.Errorf("type %s is not in the test table", p.EventType())
		}
	}
}

// equalJSON compares a and b as values, and as JSON: json.RawMessage and
// []byte fields hold the same JSON in different bytes after a round trip.
func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return string(ja) == string(jb)
}

func TestDecodeModelKeepsTheMessage(t *testing.T) {
	_, b, _ := event.Marshal(event.Model{Step: 1, Message: message, Usage: usage})
	m, ok := event.As[event.Model](event.TypeModel, b)
	if !ok || m.Message.PlainText() != "<looking> & listing" || string(m.Message.Content[1].Input) != `{"command":"ls"}` ||
		string(m.Message.Content[2].Images[0].Data) != "\x89PNG" || m.Usage != usage {
		t.Errorf("As[Model] = %+v, %v", m, ok)
	}
}

// Payloads written before package event, missing fields a writer now
// always sets, still decode: a resumed job reads old logs.
func TestDecodePartialPayloads(t *testing.T) {
	p, err := event.Decode(event.TypeNotice, []byte(`{"text":"go on","said":true}`))
	if n, ok := p.(event.Notice); err != nil || !ok || n != (event.Notice{Text: "go on", Said: true}) {
		t.Errorf("Decode(notice) = %#v, %v", p, err)
	}
	if p, err := event.Decode(event.TypeState, []byte(`{}`)); err != nil || p != (event.State{}) {
		t.Errorf("Decode(state, {}) = %#v, %v", p, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	if p, err := event.Decode("from_the_future", []byte(`{"x":1}`)); !errors.Is(err, event.ErrUnknownType) || p != nil {
		t.Errorf("unknown type: %v, %v; want ErrUnknownType", p, err)
	}
	for _, bad := range []string{`{"status":3}`, `[]`, `not json`, ``} {
		if p, err := event.Decode(event.TypeState, []byte(bad)); err == nil || errors.Is(err, event.ErrUnknownType) {
			t.Errorf("Decode(state, %q) = %#v, %v; want a decoding error", bad, p, err)
		}
		if _, ok := event.As[event.State](event.TypeState, []byte(bad)); ok {
			t.Errorf("As[State](%q) ok", bad)
		}
	}
	if _, ok := event.As[event.State](event.TypeOutput, []byte(`{"status":"complete"}`)); ok {
		t.Error("As[State] accepted an output event")
	}
}

func TestTypesAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range event.Types() {
		if seen[p.EventType()] || p.EventType() == "" {
			t.Errorf("type %q twice or empty", p.EventType())
		}
		seen[p.EventType()] = true
		if reflect.TypeOf(p).Kind() != reflect.Struct {
			t.Errorf("%T is not a struct value", p)
		}
	}
}
