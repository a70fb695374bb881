package api_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/event"
)

// TestAllowHostGuards: the job page's "allow for this job" takes the
// session and its CSRF token from the UI's origin (or a bearer token),
// like the page's other actions; without the token, with a wrong one or
// from another site it changes nothing. With it, the host is allowed, the
// change is an event by the web UI, and the section no longer lists the
// host as denied.
func TestAllowHostGuards(t *testing.T) {
	e := apitest.New(t, api.Config{})
	_, cookie := signIn(t, e, apitest.Token)
	_, body := do(t, e, req{method: "GET", path: "/", noAuth: true, header: with(navigation, "Cookie", cookie)})
	m := csrfMeta.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", body)
	}
	token := string(m[1])
	j := e.Submit("a job")
	e.Start(j.ID)
	e.Emit(j.ID, event.Network{Decision: "deny", Host: "late.test", Port: 443, Protocol: "connect", Reason: "late.test:443 is not in the job's allow list"})

	path := "/ui/jobs/" + j.ID + "/network/allow"
	form := url.Values{"host": {"late.test:443"}}.Encode()
	post := func(h map[string]string) req {
		return req{method: "POST", path: path, body: form, noAuth: true, header: with(h, "Content-Type", "application/x-www-form-urlencoded")}
	}
	for _, c := range []struct {
		name   string
		r      req
		status int
	}{
		{"without the token", post(with(scriptCall, "Cookie", cookie)), 401},
		{"with a wrong token", post(with(scriptCall, "Cookie", cookie, "X-CSRF-Token", token+"x")), 401},
		{"the token in the form only", req{method: "POST", path: path, body: form + "&csrf=" + url.QueryEscape(token), noAuth: true,
			header: with(navigation, "Cookie", cookie, "Content-Type", "application/x-www-form-urlencoded")}, 401},
		{"from another site", post(with(scriptCall, "Cookie", cookie, "X-CSRF-Token", token, "Sec-Fetch-Site", "cross-site")), 401},
		{"without a session", post(with(scriptCall, "X-CSRF-Token", token)), 401},
	} {
		if resp, body := do(t, e, c.r); resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d\n%s", c.name, resp.StatusCode, c.status, body)
		}
	}
	resp, body := do(t, e, req{method: "GET", path: "/ui/jobs/" + j.ID + "/network", noAuth: true, header: with(scriptCall, "Cookie", cookie, "X-CSRF-Token", token)})
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `data-host="late.test:443"`) || strings.Contains(string(body), "net-mode\">allow") {
		t.Fatalf("the section before (and the refused requests changed the policy?): %d\n%s", resp.StatusCode, body)
	}

	resp, body = do(t, e, post(with(scriptCall, "Cookie", cookie, "X-CSRF-Token", token)))
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), `data-host="late.test:443"`) || !strings.Contains(string(body), "<code>late.test:443</code>") {
		t.Fatalf("allow with the token: %d\n%s", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("the fragment's CSP: %q", csp)
	}
	resp, body = do(t, e, req{method: "POST", path: path, body: url.Values{"host": {"<b>x</b>"}}.Encode(),
		header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a host that is no entry, with a bearer token: %d\n%s", resp.StatusCode, body)
	}
	evs, err := e.Store.Events(context.Background(), j.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var by string
	for _, ev := range evs {
		if p, ok := event.As[event.NetworkPolicy](ev.Type, ev.Payload); ok {
			by = p.By
		}
	}
	if by != "web UI" {
		t.Errorf("the policy change is recorded as by %q", by)
	}
}
