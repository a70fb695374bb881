package render

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestStepsNetwork: a connection through the egress proxy and a change of
// policy, each on one line of stderr, as `agentbox logs` shows them.
func TestStepsNetwork(t *testing.T) {
	tests := []struct{ name, typ, payload, errw string }{
		{"allowed", "network", `{"addr":"127.0.0.1:443","bytes_in":12595,"bytes_out":0,"decision":"allow","duration_ms":400,"host":"pypi.example","method":"GET","path":"/simple/flask/","port":443,"protocol":"http","reason":"allowed by pypi.example","rule":"pypi.example"}`,
			"net  allow  GET pypi.example:443 /simple/flask/  12.3 KB in  0.4 s  (allowed by pypi.example)\n"},
		{"connect", "network", `{"bytes_in":3,"bytes_out":2048,"decision":"allow","duration_ms":1250,"host":"api.example","port":443,"protocol":"connect","secret":"github","error":"bytes bound","reason":"allowed by api.example"}`,
			"net  allow  api.example:443  3 B in  2.0 KB out  1.2 s  secret github  failed: bytes bound  (allowed by api.example)\n"},
		{"denied", "network", `{"bytes_in":0,"bytes_out":0,"decision":"deny","duration_ms":0,"host":"evil.example","port":443,"protocol":"connect","reason":"evil.example:443 is not in the job's allow list"}`,
			"net  DENY   evil.example:443  not in the job's allow list\n"},
		{"a flood's second", "network", `{"decision":"deny","host":"evil.example","port":443,"protocol":"connect","repeats":5000,"reason":"evil.example:443 is not in the job's allow list"}`,
			"net  DENY   evil.example:443  5000 times  not in the job's allow list\n"},
		{"ipv6", "network", `{"decision":"deny","host":"::1","port":80,"protocol":"http","reason":"loopback address ::1"}`,
			"net  DENY   [::1]:80  loopback address ::1\n"},
		{"changed", "network_policy", `{"by":"alice","policy":{"mode":"allow","allow":["a.test","late.test"]}}`,
			"network policy changed by alice: allow a.test, late.test\n"},
		{"at submit", "network_policy", `{"by":"submit","policy":{"mode":"open","deny":["evil.example"],"secrets":["github"]}}`,
			"network policy: open; deny evil.example; secrets github\n"},
		{"none", "network_policy", `{"by":"bob","policy":{"mode":"none"}}`, "network policy changed by bob: none\n"},
		{"methods", "network_policy", `{"by":"bob","policy":{"allow":[{"host":"api.example:8443","methods":["GET"]}],"presets":["python"]}}`,
			"network policy changed by bob: allow api.example:8443 (GET); presets python\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errw bytes.Buffer
			if err := NewSteps(&out, &errw).Show(tt.typ, json.RawMessage(tt.payload)); err != nil {
				t.Fatal(err)
			}
			if out.Len() != 0 || errw.String() != tt.errw {
				t.Errorf("stdout %q\nstderr %q\n  want %q", out.String(), errw.String(), tt.errw)
			}
		})
	}
}

// TestStepsNetworkColour: on a terminal a denial is red (the way a diff's
// removed lines are) and an allowed connection is not; a host or path with
// control characters never reaches the terminal with them.
func TestStepsNetworkColour(t *testing.T) {
	var out, errw bytes.Buffer
	s := NewSteps(&out, &errw)
	s.color = true
	_ = s.Show("network", json.RawMessage(`{"decision":"deny","host":"evil.example","port":443,"reason":"denied by evil.example"}`))
	_ = s.Show("network", json.RawMessage(`{"decision":"allow","host":"ok.example","port":443,"path":"/a\u001b]52;c;aGk=\u0007b"}`))
	lines := strings.Split(errw.String(), "\n")
	if want := red + "net  DENY   evil.example:443  denied by evil.example" + reset; lines[0] != want {
		t.Errorf("denial %q, want %q", lines[0], want)
	}
	if strings.ContainsAny(lines[1], "\x1b\x07") {
		t.Errorf("allowed line with controls: %q", lines[1])
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KB", 12595: "12.3 KB", 5 << 20: "5.0 MB", 3 << 30: "3.0 GB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
