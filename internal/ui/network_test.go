package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/jobs"
	"github.com/agentbox/agentbox/internal/store"
)

// netService is a logService whose job's policy can be changed, as
// jobs.Service.UpdateNetwork does: fn gets the policy the job records,
// and the change is recorded on the job and as a network_policy event.
type netService struct {
	*logService
	set []egress.Policy
	by  []string
	err error // what UpdateNetwork answers, when set
	// meanwhile, when set, runs once after the next read of the job:
	// another change racing the one being made.
	meanwhile func()
}

func (s *netService) UpdateNetwork(ctx context.Context, id string, fn func(egress.Policy) (egress.Policy, error)) (egress.Policy, error) {
	caller, _ := jobs.PrincipalOf(ctx)
	by := caller.Name
	var cur egress.Policy
	if len(s.job.Network) > 0 {
		_ = json.Unmarshal(s.job.Network, &cur)
	}
	cur.Mode = mode(cur)
	p, err := fn(cur)
	if err != nil {
		return p, err
	}
	if s.err != nil {
		return p, s.err
	}
	s.set, s.by = append(s.set, p), append(s.by, by)
	b, _ := json.Marshal(p)
	s.job.Network = b // in the same write as the event, as the store does
	s.add(event.NetworkPolicy{By: by, Policy: b})
	return p, nil
}

func (s *netService) Get(ctx context.Context, id string) (store.Job, error) {
	j, err := s.logService.Get(ctx, id)
	if f := s.meanwhile; f != nil {
		s.meanwhile = nil
		f()
	}
	return j, err
}

func policyEvent(t *testing.T, by, policy string) event.NetworkPolicy {
	t.Helper()
	var p egress.Policy
	if err := json.Unmarshal([]byte(policy), &p); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(p)
	return event.NetworkPolicy{By: by, Policy: b}
}

func deny(host string, port int, reason string) event.Network {
	return event.Network{Decision: "deny", Host: host, Port: port, Protocol: "connect", Reason: reason}
}

// newNetLog is a running job with a policy and some connections: two
// denials of late.test, 40 of a host a deny entry covers (one event), one of a name
// that is no valid entry, one of an allowed host at a private address.
func newNetLog(t *testing.T) *netService {
	s := &netService{logService: newLog()}
	pe := policyEvent(t, "submit", `{"allow":["a.test"],"deny":["evil.example"],"presets":["python"],"secrets":["github"]}`)
	s.job.Network = pe.Policy
	s.add(pe)
	s.add(event.Network{Decision: "allow", Host: "a.test", Port: 443, Method: "GET", Path: "/simple/", BytesIn: 12595, DurationMS: 400, Protocol: "http", Reason: "allowed by a.test"})
	s.add(deny("late.test", 443, "late.test:443 is not in the job's allow list"))
	s.add(deny("late.test", 443, "late.test:443 is not in the job's allow list"))
	flood := deny("evil.example", 443, "denied by evil.example")
	flood.Repeats = 40 // a second's repeats, recorded as one event
	s.add(flood)
	s.add(deny("x\"><script>", 443, "not a name "+hostile))
	s.add(event.Network{Decision: "deny", Host: "a.test", Port: 443, Addr: "10.0.0.1:443", Protocol: "connect", Reason: "private address 10.0.0.1"})
	return s
}

// TestTimelineNetwork: a connection is one compact line; a denied one is
// marked in words and by class (not by colour alone); a policy change
// says who made it.
func TestTimelineNetwork(t *testing.T) {
	s := newNetLog(t)
	s.add(policyEvent(t, "alice", `{"allow":["a.test","late.test"]}`))
	body := get(t, New(Config{}, s, nil).Timeline, "/ui/jobs/j1/timeline?after=7").Body.String()
	for _, want := range []string{
		`<li class="ev ev-info" data-seq="8">`, "Set at submission: allow a.test; deny evil.example; presets python; secrets github",
		`<li class="ev ev-net" data-seq="9">`, `<p class="ev-text ev-net-line">GET a.test:443 /simple/ · 12.3 KB in · 0.4 s · allowed by a.test</p>`,
		`<li class="ev ev-net ev-error ev-denied" data-seq="10">`, `<span class="ev-mark">✗ denied</span>`,
		`late.test:443 · not in the job&#39;s allow list`,
		"Changed by alice: allow a.test, late.test",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("timeline lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<script>") || strings.Contains(body, `x"><`) {
		t.Errorf("a host or reason from the sandbox is not escaped:\n%s", body)
	}
	if n := strings.Count(body, "✗ denied"); n != 5 {
		t.Errorf("%d denials marked, want 5", n)
	}
}

// TestNetworkSection: the section shows the policy in force and the hosts
// denied so far, with counts and the last reason, and a button only where
// allowing the host would let it through.
func TestNetworkSection(t *testing.T) {
	s := newNetLog(t)
	u := New(Config{}, s, nil)
	body := get(t, u.Network, "/ui/jobs/j1/network").Body.String()
	for _, want := range []string{
		`<strong class="net-mode">allow</strong>`, "(set by submit)",
		"<dt>Allow</dt><dd><code>a.test</code></dd>", "<dt>Deny</dt><dd><code>evil.example</code></dd>",
		"<dt>Presets</dt><dd>python</dd>", "<dt>Secrets</dt><dd>github</dd>",
		"<caption>Hosts denied so far</caption>",
		`<code>late.test:443</code></td><td class="num">2</td><td>not in the job&#39;s allow list</td>`,
		`<button type="button" class="allow-host" data-host="late.test:443">Allow for this job</button>`,
		`<code>evil.example:443</code></td><td class="num">40</td><td>denied by evil.example</td>`,
		`<code>a.test:443</code></td><td class="num">1</td><td>private address 10.0.0.1</td>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("section lacks %q:\n%s", want, body)
		}
	}
	if n := strings.Count(body, `class="allow-host"`); n != 1 {
		t.Errorf("%d buttons, want 1 (a deny entry, an invalid name and an allowed host get none):\n%s", n, body)
	}
	if strings.Contains(body, "<script>") {
		t.Errorf("a denied host is not escaped:\n%s", body)
	}

	// The job page holds the section's place; its script loads it.
	r := httptest.NewRequest("GET", "/jobs/j1", nil)
	r.SetPathValue("id", "j1")
	w := httptest.NewRecorder()
	if err := u.Job(w, r, Session{CSRF: "c"}); err != nil {
		t.Fatal(err)
	}
	if page := w.Body.String(); !strings.Contains(page, `id="network"`) || !strings.Contains(page, `data-url="/ui/jobs/j1/network"`) ||
		!strings.Contains(page, `data-allow="/ui/jobs/j1/network/allow"`) {
		t.Errorf("the job page has no Network section:\n%s", page)
	}

	// A server that cannot change policies shows no buttons.
	body = get(t, New(Config{}, s.logService, nil).Network, "/ui/jobs/j1/network").Body.String()
	if strings.Contains(body, "allow-host") || !strings.Contains(body, "late.test:443") {
		t.Errorf("without SetNetwork:\n%s", body)
	}
}

func postAllow(t *testing.T, u *UI, host string) (string, error) {
	t.Helper()
	r := httptest.NewRequest("POST", "/ui/jobs/j1/network/allow", strings.NewReader(url.Values{"host": {host}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.SetPathValue("id", "j1")
	r = r.WithContext(jobs.WithPrincipal(r.Context(), jobs.Principal{Name: ByUI})) // as the API's fragments do
	w := httptest.NewRecorder()
	err := u.AllowHost(w, r)
	return w.Body.String(), err
}

// TestAllowHost: "allow for this job" adds the host:port to the allow
// list of the policy in force, by the web UI, and the re-rendered section
// (and the section loaded afresh from the log) no longer lists it as
// denied.
func TestAllowHost(t *testing.T) {
	s := newNetLog(t)
	u := New(Config{}, s, nil)
	body, err := postAllow(t, u, "late.test:443")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.set) != 1 || s.by[0] != ByUI {
		t.Fatalf("SetNetwork calls: %+v by %v", s.set, s.by)
	}
	got, _ := json.Marshal(s.set[0])
	if want := `{"mode":"allow","allow":["a.test","late.test:443"],"deny":["evil.example"],"presets":["python"],"secrets":["github"]}`; string(got) != want {
		t.Errorf("policy put in force %s, want %s", got, want)
	}
	for _, b := range []string{body, get(t, u.Network, "/ui/jobs/j1/network").Body.String()} {
		if strings.Contains(b, "<code>late.test:443</code></td>") || !strings.Contains(b, "<code>late.test:443</code>") ||
			!strings.Contains(b, "<code>evil.example:443</code></td>") {
			t.Errorf("late.test:443 still denied, or not allowed, or evil.example gone:\n%s", b)
		}
	}
	if !strings.Contains(body, "(set by web UI)") {
		t.Errorf("section does not say who changed it:\n%s", body)
	}

	// Denied again after the change (the proxy refused it for another
	// reason): listed again.
	s.add(deny("late.test", 443, "private address 10.1.1.1"))
	if b := get(t, u.Network, "/ui/jobs/j1/network").Body.String(); !strings.Contains(b, "private address 10.1.1.1") {
		t.Errorf("a later denial is not listed:\n%s", b)
	}
}

// TestAllowHostFromNone: mode none becomes allow with the one host.
func TestAllowHostFromNone(t *testing.T) {
	s := &netService{logService: newLog()}
	s.add(deny("pypi.example", 443, "the job's network mode is none"))
	u := New(Config{}, s, nil)
	if b := get(t, u.Network, "/ui/jobs/j1/network").Body.String(); !strings.Contains(b, `data-host="pypi.example:443"`) || !strings.Contains(b, "no policy recorded in the job's log yet") {
		t.Fatalf("section of a job without a policy event:\n%s", b)
	}
	if _, err := postAllow(t, u, "pypi.example:443"); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(s.set); string(got) != `[{"mode":"allow","allow":["pypi.example:443"]}]` {
		t.Errorf("policy put in force %s", got)
	}
}

// TestAllowHostRefuses: the form's host is parsed again as an entry, never
// taken as it stands; a host a deny entry covers, or a policy the service
// refuses, changes nothing and says why in the section.
func TestAllowHostRefuses(t *testing.T) {
	s := newNetLog(t)
	u := New(Config{}, s, nil)
	for _, bad := range []string{"", `x"><script>alert(1)</script>`, "a.test:99999", "a b", strings.Repeat("a", 400)} {
		if _, err := postAllow(t, u, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("host %q: %v, want ErrInvalid", bad, err)
		}
	}
	body, err := postAllow(t, u, "evil.example:443")
	if err != nil || !strings.Contains(body, "deny beats allow") {
		t.Errorf("a denied host: %v\n%s", err, body)
	}
	s.err = &egress.FieldError{Field: "mode", Err: errors.New(`mode "allow" is not allowed here`)}
	body, err = postAllow(t, u, "late.test:443")
	if err != nil || !strings.Contains(body, "The policy was not changed: mode: mode &#34;allow&#34; is not allowed here") {
		t.Errorf("a refused policy: %v\n%s", err, body)
	}
	if len(s.set) != 0 {
		t.Errorf("SetNetwork put %+v in force", s.set)
	}
	s.err = store.ErrNotFound
	if _, err := postAllow(t, u, "late.test:443"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another error: %v", err)
	}
}

// TestNetworkSectionEmpty: a job without network that tried nothing has
// an empty section (the page hides it), so it costs the page no room.
func TestNetworkSectionEmpty(t *testing.T) {
	s := &netService{logService: newLog()}
	u := New(Config{}, s, nil)
	if b := strings.TrimSpace(get(t, u.Network, "/ui/jobs/j1/network").Body.String()); b != "" {
		t.Errorf("section of a job without network:\n%s", b)
	}
	s.add(policyEvent(t, "submit", `{"mode":"none"}`))
	if b := strings.TrimSpace(get(t, u.Network, "/ui/jobs/j1/network").Body.String()); b != "" {
		t.Errorf("section of a job with mode none:\n%s", b)
	}
	s.add(policyEvent(t, "bob", `{"mode":"open"}`))
	if b := get(t, u.Network, "/ui/jobs/j1/network").Body.String(); !strings.Contains(b, `<strong class="net-mode">open</strong>`) {
		t.Errorf("section of a job with mode open:\n%s", b)
	}
}

// TestAllowHostOneHost: a denied "host" is whatever name the sandbox
// asked the proxy for (a SOCKS5 name is any 255 bytes), so one that reads
// as a wildcard or a range ("*.com", "0.0.0.0/0") gets no "allow for this
// job" button, and the form refuses it: one click from a name the sandbox
// chose must allow that one host, not every .com name or every IPv4
// address (which is mode open, whatever AGENTBOX_EGRESS_MODES says).
func TestAllowHostOneHost(t *testing.T) {
	s := &netService{logService: newLog()}
	s.add(policyEvent(t, "submit", `{"allow":["a.test"]}`))
	for _, h := range []string{"*.com", "0.0.0.0/0", "::/0", "10.0.0.0/8", "1.2.3.4", "late.test"} {
		s.add(deny(h, 443, `"`+h+`" is not a host name`))
	}
	u := New(Config{}, s, nil)
	body := get(t, u.Network, "/ui/jobs/j1/network").Body.String()
	for _, h := range []string{"*.com:443", "0.0.0.0/0:443", "[::/0]:443", "10.0.0.0/8:443"} {
		if strings.Contains(body, `data-host="`+h+`"`) {
			t.Errorf("a button allows %s:\n%s", h, body)
		}
	}
	for _, h := range []string{"1.2.3.4:443", "late.test:443"} {
		if !strings.Contains(body, `data-host="`+h+`"`) {
			t.Errorf("no button for %s:\n%s", h, body)
		}
	}
	for _, h := range []string{"*.com:443", "0.0.0.0/0:443", "[::/0]:443", "10.0.0.0/8"} {
		if _, err := postAllow(t, u, h); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("allow %s: %v, want ErrInvalid", h, err)
		}
	}
	if len(s.set) != 0 {
		t.Errorf("SetNetwork put %+v in force", s.set)
	}
}

// TestNetworkPolicyPastScan: the section reads the log's last
// maxNetworkScan events, and a sandbox makes as many as it likes (one
// connection attempt each), so the policy it shows and that "allow for
// this job" extends is the job's own, not whatever policy event the
// window still holds: a job submitted with mode open, whose policy event
// scrolled out, showed "none", and one click replaced its whole policy
// (deny entries, presets and secrets lost) with the one host.
func TestNetworkPolicyPastScan(t *testing.T) {
	s := &netService{logService: newLog()}
	pe := policyEvent(t, "submit", `{"mode":"open","deny":["evil.example"],"presets":["python"]}`)
	s.job.Network = pe.Policy
	s.add(pe)
	for i := range maxNetworkScan {
		s.add(deny(fmt.Sprintf("h%d.evil.example", i%50), 443, "denied by evil.example"))
	}
	s.add(deny("late.test", 8443, "late.test:8443 is not in the job's allow list"))
	u := New(Config{}, s, nil)
	body := get(t, u.Network, "/ui/jobs/j1/network").Body.String()
	if !strings.Contains(body, `<strong class="net-mode">open</strong>`) || !strings.Contains(body, "<dt>Deny</dt><dd><code>evil.example</code></dd>") {
		t.Errorf("the section does not show the job's policy:\n%s", body)
	}
	if _, err := postAllow(t, u, "late.test:8443"); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(s.set)
	if want := `[{"mode":"open","allow":["late.test:8443"],"deny":["evil.example"],"presets":["python"]}]`; string(got) != want {
		t.Errorf("policy put in force %s, want %s", got, want)
	}
}

// TestAllowHostRacesPatch: "allow for this job" read the policy in force
// and wrote it back with the host, reading up to 50,000 events in
// between; a PATCH meanwhile (an operator adding a deny entry) was lost
// under the policy read before it. It must be what the host is added to.
func TestAllowHostRacesPatch(t *testing.T) {
	s := newNetLog(t)
	u := New(Config{}, s, nil)
	s.meanwhile = func() {
		p := policyEvent(t, "api", `{"allow":["a.test"],"deny":["evil.example","late.test:8443"]}`)
		s.job.Network = p.Policy
		s.add(p)
	}
	if _, err := postAllow(t, u, "late.test:443"); err != nil {
		t.Fatal(err)
	}
	if got, want := string(s.job.Network), `{"mode":"allow","allow":["a.test","late.test:443"],"deny":["evil.example","late.test:8443"]}`; got != want {
		t.Errorf("policy in force %s, want %s (the PATCH made meanwhile, with the host)", got, want)
	}
}

// TestNetworkSectionRepeats: a flood's second of attempts alike is one
// event with Repeats; the section counts the attempts.
func TestNetworkSectionRepeats(t *testing.T) {
	s := newNetLog(t)
	ev := deny("flood.test", 443, "flood.test:443 is not in the job's allow list")
	ev.Repeats = 5000
	s.add(ev)
	body := get(t, New(Config{}, s, nil).Network, "/ui/jobs/j1/network").Body.String()
	if !strings.Contains(body, `<code>flood.test:443</code></td><td class="num">5000</td>`) {
		t.Errorf("5,000 tries in one event not counted:\n%s", body)
	}
	if tl := get(t, New(Config{}, s, nil).Timeline, "/ui/jobs/j1/timeline").Body.String(); !strings.Contains(tl, "flood.test:443 · 5000 times · not in the job&#39;s allow list") {
		t.Errorf("the timeline does not say how many times:\n%s", tl)
	}
}
