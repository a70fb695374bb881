package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/egress/egresstest"
)

// The egress tests: local HTTPS servers on 127.0.0.1 with their own CA
// (egresstest), named through AGENTBOX_EGRESS_RESOLVE and opened with
// AGENTBOX_EGRESS_ALLOW_PRIVATE=127.0.0.1/32; never an outside address.
// Each job is a shell script (AGENTBOX_AGENT=shell) run in a real sandbox.

// egressNames are the names the tests pin: all to 127.0.0.1 but
// rebind.test, which names 127.0.0.2 (not opened).
var egressNames = []string{"pypi.test", "denied.test", "late.test", "secret.test", "rebind.test", "evil.test"}

// egressSecretValue is the value of the secret "tok", bound to
// secret.test: it must never be seen inside a sandbox or in a log.
const egressSecretValue = "real-token-3b8f0e7d1c2a"

// egressServer starts a server whose sandboxes reach u through the proxy.
func egressServer(t *testing.T, u *egresstest.Upstream, extraEnv ...string) *server {
	t.Helper()
	var pins []string
	for _, n := range egressNames {
		addr := "127.0.0.1"
		if n == "rebind.test" {
			addr = "127.0.0.2"
		}
		pins = append(pins, n+"="+addr)
	}
	secrets := filepath.Join(t.TempDir(), "secrets.json")
	b, _ := json.Marshal(map[string]any{"tok": map[string]any{
		"hosts": []string{fmt.Sprintf("secret.test:%d", u.Port)}, "header": "Authorization: Bearer {value}", "env": "EGRESS_TEST_TOKEN"}})
	if err := os.WriteFile(secrets, b, 0o600); err != nil {
		t.Fatal(err)
	}
	env := append([]string{"AGENTBOX_EGRESS_RESOLVE=" + strings.Join(pins, ","),
		"AGENTBOX_EGRESS_ALLOW_PRIVATE=127.0.0.1/32", "AGENTBOX_EGRESS_CA=" + u.CAFile,
		"AGENTBOX_EGRESS_SECRETS=" + secrets, "EGRESS_TEST_TOKEN=" + egressSecretValue}, extraEnv...)
	s := newServer(t, env...)
	s.start()
	return s
}

// submitJob submits body (task, network, ...) and returns the job's ID.
func (s *server) submitJob(t *testing.T, body map[string]any) string {
	t.Helper()
	var sub struct {
		JobID string          `json:"job_id"`
		Error json.RawMessage `json:"error"`
	}
	if code := s.do("POST", "/v1/jobs", body, &sub); code != 201 {
		t.Fatalf("submit: %d %s\n%s", code, sub.Error, s.logs)
	}
	return sub.JobID
}

// networkEvents are the job's network events' payloads.
func (s *server) networkEvents(id string) []map[string]any {
	var out []map[string]any
	for _, ev := range s.events(id) {
		if ev.Type == "network" {
			var p map[string]any
			json.Unmarshal(ev.Payload, &p)
			out = append(out, p)
		}
	}
	return out
}

// TestEgressOnEveryTier runs, in a real sandbox on each tier, curl, pip
// (a tiny local index), npm (a local registry serving one tarball) and git
// over HTTPS against an allowed name; a denied name, a name resolving to a
// refused address, an IPv6 loopback literal and a TLS server name that
// differs from the CONNECT's are refused with events; DNS and a direct
// connection have no way out; and a secret-bound host sees the real
// header while no trace of it is inside or in the log.
func TestEgressOnEveryTier(t *testing.T) {
	t.Parallel()
	for _, tier := range []string{"container", "gvisor", "microvm"} {
		t.Run(tier, func(t *testing.T) {
			t.Parallel()
			needTier(t, tier)
			u := egresstest.Start(t, egressNames...) // each tier's own: the requests it saw are its sandbox's
			s := egressServer(t, u)
			script := fmt.Sprintf(`set -eu
cd /workspace
P=%d
curl -sS https://pypi.test:$P/ > curl.txt
pip install -q --user --no-cache-dir --index-url https://pypi.test:$P/simple/ tinypkg
python3 -c 'import tinypkg; print(tinypkg.GREETING)' > pip.txt
npm install -s --no-audit --no-fund --no-update-notifier --registry https://pypi.test:$P/npm/ tinypkg
node -e 'console.log(require("tinypkg"))' > npm.txt
git clone -q https://pypi.test:$P/git/repo.git repo
if curl -sS https://denied.test:$P/ 2> denied.txt; then echo denied.test answered; exit 1; fi
if curl -sS https://rebind.test:$P/ 2> rebind.txt; then echo rebind.test answered; exit 1; fi
if curl -sS --max-time 10 "https://[::1]:$P/" 2> v6.txt; then echo ::1 answered; exit 1; fi
if curl -sS --noproxy '*' --max-time 5 https://pypi.test:$P/ 2> direct.txt; then echo direct answered; exit 1; fi
if getent hosts pypi.test > dns.txt; then echo DNS answered; exit 1; fi
(ls /sys/class/net 2>/dev/null || sed 1,2d /proc/net/dev | cut -d: -f1 | tr -d ' ') > ifaces.txt
python3 - > sni.txt 2>&1 <<'EOF' || true
import socket, ssl
s = socket.create_connection(("127.0.0.1", %d))
s.sendall(b"CONNECT pypi.test:%d HTTP/1.1\r\nHost: pypi.test:%d\r\n\r\n")
print(s.recv(4096).split(b"\r\n")[0].decode())
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
try:
    ctx.wrap_socket(s, server_hostname="evil.test").do_handshake()
    print("handshake completed")
except Exception as e:
    print("refused:", type(e).__name__)
EOF
curl -sS -H "Authorization: Bearer $EGRESS_TEST_TOKEN" https://secret.test:$P/whoami > secret.txt
printenv EGRESS_TEST_TOKEN > placeholder.txt
cat /proc/[0-9]*/environ > environ.dump 2>/dev/null || true
tar cf inside.tar /tmp /home/agent 2>/dev/null || true
`, u.Port, 3128, u.Port, u.Port)
			id := s.submitJob(t, map[string]any{"task": script, "isolation": tier, "network": map[string]any{
				"allow":   []string{fmt.Sprintf("pypi.test:%d", u.Port), fmt.Sprintf("rebind.test:%d", u.Port), fmt.Sprintf("[::1]:%d", u.Port)},
				"secrets": []string{"tok"}}})
			j := s.awaitFinal([]string{id})[id]
			if j.Status != "complete" {
				t.Fatalf("job %+v\n%s", j, s.output(id))
			}
			file := func(name string) string { return string(s.get(t, "/v1/jobs/"+id+"/files/"+name, 200)) }
			for name, want := range map[string]string{
				"curl.txt":       "hello from pypi.test",
				"pip.txt":        "hello from tinypkg",
				"npm.txt":        "hello from tinypkg",
				"repo/README.md": "hello from git",
				"ifaces.txt":     "lo",
				"secret.txt":     "hello from secret.test",
			} {
				if got := file(name); !strings.Contains(got, want) {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			if got := strings.Fields(file("ifaces.txt")); len(got) != 1 {
				t.Errorf("interfaces inside: %q, want lo only", got)
			}
			for name, want := range map[string]string{
				"denied.txt": "403", "rebind.txt": "403", "v6.txt": "403",
				"direct.txt": "resolve", "sni.txt": "refused:",
			} {
				if got := file(name); !strings.Contains(got, want) {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			placeholder := strings.TrimSpace(file("placeholder.txt"))
			if placeholder == "" || strings.Contains(placeholder, egressSecretValue) {
				t.Errorf("the sandbox's EGRESS_TEST_TOKEN = %q, want a placeholder", placeholder)
			}
			var sawSecret bool
			for _, r := range u.Requests() {
				if r.Host == "secret.test" {
					sawSecret = true
					if r.Authorization != "Bearer "+egressSecretValue {
						t.Errorf("secret.test saw Authorization %q, want the real value", r.Authorization)
					}
				}
			}
			if !sawSecret {
				t.Error("secret.test saw no request")
			}
			for _, name := range []string{"environ.dump", "inside.tar", "secret.txt", "curl.txt"} {
				if bytes.Contains(s.get(t, "/v1/jobs/"+id+"/files/"+name, 200), []byte(egressSecretValue)) {
					t.Errorf("%s inside the sandbox holds the secret's value", name)
				}
			}
			evs, _ := json.Marshal(s.events(id))
			if bytes.Contains(evs, []byte(egressSecretValue)) {
				t.Error("the job's events hold the secret's value")
			}
			denied := map[string]string{}
			for _, ev := range s.networkEvents(id) {
				if ev["decision"] == "deny" {
					denied[fmt.Sprint(ev["host"])] = fmt.Sprint(ev["reason"])
				}
			}
			for _, host := range []string{"denied.test", "rebind.test", "::1", "pypi.test"} {
				if _, ok := denied[host]; !ok {
					t.Errorf("no deny event for %s; denials %q", host, denied)
				}
			}
		})
	}
}

// output is the job's command output, for a failure's message.
func (s *server) output(id string) string {
	var b strings.Builder
	for _, ev := range s.events(id) {
		if ev.Type == "output" || ev.Type == "exit" || ev.Type == "state" || ev.Type == "network" {
			fmt.Fprintf(&b, "%s %s\n", ev.Type, ev.Payload)
		}
	}
	return b.String()
}

// TestEgressTranscriptAndPatch: the transcript has exactly the
// connections made; a job denied late.test succeeds after PATCH adds it,
// and the change is an event naming who made it; the bytes bound closes a
// large download.
func TestEgressTranscriptAndPatch(t *testing.T) {
	t.Parallel()
	u := egresstest.Start(t, egressNames...)
	s := egressServer(t, u)
	allow := fmt.Sprintf("pypi.test:%d", u.Port)

	exact := s.submitJob(t, map[string]any{"task": fmt.Sprintf(
		"curl -sS https://pypi.test:%d/ && ! curl -sS https://denied.test:%d/", u.Port, u.Port),
		"network": map[string]any{"allow": []string{allow}}})
	late := s.submitJob(t, map[string]any{"task": fmt.Sprintf(
		"for i in $(seq 120); do curl -sS https://late.test:%d/ && exit 0; sleep 0.5; done; exit 1", u.Port),
		"network": map[string]any{"allow": []string{allow}}})
	big := s.submitJob(t, map[string]any{"task": fmt.Sprintf(
		"curl -sS -o /dev/null https://pypi.test:%d/big?bytes=67108864", u.Port),
		"network": map[string]any{"allow": []string{allow}}, "limits": map[string]any{"egress": "4m"}})

	// The server's own API, on loopback that ALLOW_PRIVATE opens (by a
	// name pinned there: 127.0.0.1 itself is the sandbox's, NO_PROXY):
	// never reached, even in mode open.
	_, serverPort, _ := strings.Cut(strings.TrimPrefix(s.url, "http://"), ":")
	own := s.submitJob(t, map[string]any{"task": "! curl -sSf http://pypi.test:" + serverPort + "/healthz", "network": map[string]any{"mode": "open"}})

	j := s.awaitFinal([]string{exact})[exact]
	if j.Status != "complete" {
		t.Fatalf("job %+v\n%s", j, s.output(exact))
	}
	if j := s.awaitFinal([]string{own})[own]; j.Status != "complete" {
		t.Errorf("a job in mode open reached the server's API: %+v\n%s", j, s.output(own))
	}
	if evs := s.networkEvents(own); len(evs) != 1 || !strings.HasPrefix(fmt.Sprint(evs[0]["reason"]), "agentbox's own server") {
		t.Errorf("transcript of the job calling the server: %v", evs)
	}
	// A connection is recorded when it ends: the denied one may come
	// before the allowed one that the proxy was still closing.
	evs := s.networkEvents(exact)
	if len(evs) == 2 && evs[0]["host"] == "denied.test" {
		evs[0], evs[1] = evs[1], evs[0]
	}
	if len(evs) != 2 || evs[0]["host"] != "pypi.test" || evs[0]["decision"] != "allow" ||
		evs[1]["host"] != "denied.test" || evs[1]["decision"] != "deny" {
		t.Errorf("transcript %v, want one allowed pypi.test and one denied denied.test", evs)
	}
	if in, _ := evs[0]["bytes_in"].(float64); in <= 0 {
		t.Errorf("allowed connection's bytes_in %v", evs[0]["bytes_in"])
	}

	waitUntil(t, 2*time.Minute, func() bool {
		for _, ev := range s.networkEvents(late) {
			if ev["host"] == "late.test" && ev["decision"] == "deny" {
				return true
			}
		}
		return false
	})
	var got map[string]any
	body := map[string]any{"allow": []string{allow, fmt.Sprintf("late.test:%d", u.Port)}}
	if code := s.do("PATCH", "/v1/jobs/"+late+"/network", body, &got); code != 200 {
		t.Fatalf("PATCH network: %d %v", code, got)
	}
	if j := s.awaitFinal([]string{late})[late]; j.Status != "complete" {
		t.Fatalf("late job %+v\n%s", j, s.output(late))
	}
	var changed bool
	for _, ev := range s.events(late) {
		if ev.Type == "network_policy" && strings.Contains(string(ev.Payload), "late.test") {
			changed = true
		}
	}
	if !changed {
		t.Error("no network_policy event for the PATCH")
	}
	var summary struct {
		Hosts []map[string]any `json:"hosts"`
	}
	s.do("GET", "/v1/jobs/"+late+"/network", nil, &summary)
	var lateAllowed bool
	for _, h := range summary.Hosts {
		if h["host"] == "late.test" {
			lateAllowed = h["allowed"].(float64) >= 1 && h["denied"].(float64) >= 1
		}
	}
	if !lateAllowed {
		t.Errorf("GET network hosts %v, want late.test both denied and allowed", summary.Hosts)
	}

	if j := s.awaitFinal([]string{big})[big]; j.Status == "complete" {
		t.Errorf("a 64 MiB download under a 4 MiB egress bound completed")
	}
	var bound bool
	for _, ev := range s.networkEvents(big) {
		if e, _ := ev["error"].(string); strings.Contains(e, "bound") {
			bound = true
			if in, _ := ev["bytes_in"].(float64); in > 8<<20 {
				t.Errorf("bytes_in %v past a 4 MiB bound", in)
			}
		}
	}
	if !bound {
		t.Errorf("no network event says the bound closed the download: %v", s.networkEvents(big))
	}
}
