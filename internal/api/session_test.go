package api_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
)

// The headers a browser sends with a top-level navigation of its own
// origin, and with a script's fetch.
var (
	navigation = map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
	scriptCall = map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "same-origin", "Sec-Fetch-Dest": "empty"}
)

func with(h map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(out, kv[i])
		} else {
			out[kv[i]] = kv[i+1]
		}
	}
	return out
}

// signIn posts the sign-in form and returns the session cookie.
func signIn(t *testing.T, e *apitest.Env, token string) (*http.Response, string) {
	t.Helper()
	form := url.Values{"token": {token}, "next": {"/new"}}.Encode()
	resp, body := do(t, e, req{method: "POST", path: "/ui/login", body: form, noAuth: true,
		header: with(navigation, "Content-Type", "application/x-www-form-urlencoded", "Origin", e.URL)})
	for _, c := range resp.Cookies() {
		if c.Name == api.SessionCookie && c.Value != "" {
			return resp, c.Name + "=" + c.Value
		}
	}
	if resp.StatusCode == http.StatusSeeOther {
		t.Fatalf("signed in without a cookie: %d %s", resp.StatusCode, body)
	}
	return resp, ""
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)

// TestSessionSignIn covers the sign-in page, a wrong token, the cookie's
// attributes and the redirect to the page asked for.
func TestSessionSignIn(t *testing.T) {
	e := apitest.New(t, api.Config{})
	resp, body := do(t, e, req{method: "GET", path: "/", noAuth: true, header: navigation})
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `type="password"`) || !strings.Contains(string(body), `type="submit"`) {
		t.Fatalf("GET / without a session: %d\n%s", resp.StatusCode, body)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if resp.Header.Get("Cross-Origin-Opener-Policy") != "same-origin" || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("page headers: %v", resp.Header)
	}

	resp, _ = signIn(t, e, "wrong")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d, want 401", resp.StatusCode)
	}
	resp, cookie := signIn(t, e, apitest.Token)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/new" {
		t.Fatalf("sign-in: %d to %q, want 303 to /new", resp.StatusCode, resp.Header.Get("Location"))
	}
	set := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(set, want) {
			t.Errorf("Set-Cookie %q lacks %s", set, want)
		}
	}
	if strings.Contains(set, "Secure") {
		t.Errorf("Set-Cookie %q is Secure on plain HTTP without a public https URL", set)
	}
	resp, body = do(t, e, req{method: "GET", path: "/", noAuth: true, header: with(navigation, "Cookie", cookie)})
	if resp.StatusCode != http.StatusOK || !csrfMeta.Match(body) || strings.Contains(string(body), `type="password"`) {
		t.Fatalf("GET / signed in: %d\n%s", resp.StatusCode, body)
	}

	// Behind an https public URL the cookie is Secure.
	es := apitest.New(t, api.Config{BaseURL: "https://agentbox.example"})
	resp, _ = signIn(t, es, apitest.Token)
	if !strings.Contains(resp.Header.Get("Set-Cookie"), "Secure") {
		t.Errorf("Set-Cookie %q behind https is not Secure", resp.Header.Get("Set-Cookie"))
	}

	// A sign-in another site's page posts is refused; so is a next page
	// on another site.
	form := url.Values{"token": {apitest.Token}}.Encode()
	resp, _ = do(t, e, req{method: "POST", path: "/ui/login", body: form, noAuth: true,
		header: with(navigation, "Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example")})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site sign-in: %d, want 403", resp.StatusCode)
	}
	for _, next := range []string{"//evil.example/", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"} {
		form := url.Values{"token": {apitest.Token}, "next": {next}}.Encode()
		resp, _ = do(t, e, req{method: "POST", path: "/ui/login", body: form, noAuth: true,
			header: with(navigation, "Content-Type", "application/x-www-form-urlencoded")})
		if loc := resp.Header.Get("Location"); loc != "/" {
			t.Errorf("next %q: redirected to %q, want /", next, loc)
		}
	}
}

// TestSessionGuards checks what the cookie opens and what it does not: pages
// to top-level navigations only, the API only with the CSRF token and from
// the UI's origin, nothing without Fetch Metadata while the views share the
// origin; sign-out needs the token and clears the cookie.
func TestSessionGuards(t *testing.T) {
	e := apitest.New(t, api.Config{})
	_, cookie := signIn(t, e, apitest.Token)
	_, body := do(t, e, req{method: "GET", path: "/", noAuth: true, header: with(navigation, "Cookie", cookie)})
	m := csrfMeta.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", body)
	}
	token := string(m[1])
	j := e.Submit("a job")

	for _, c := range []struct {
		name   string
		r      req
		status int
	}{
		{"page", req{method: "GET", path: "/jobs/" + j.ID, header: with(navigation, "Cookie", cookie)}, 200},
		{"page in a frame", req{method: "GET", path: "/", header: with(navigation, "Cookie", cookie, "Sec-Fetch-Dest", "iframe")}, 403},
		{"page fetched by a script", req{method: "GET", path: "/", header: with(scriptCall, "Cookie", cookie)}, 403},
		{"page without Fetch Metadata", req{method: "GET", path: "/", header: map[string]string{"Cookie": cookie}}, 403},
		{"API with the token", req{method: "GET", path: "/v1/jobs", header: with(scriptCall, "Cookie", cookie, "X-CSRF-Token", token)}, 200},
		{"API without the token", req{method: "GET", path: "/v1/jobs", header: with(scriptCall, "Cookie", cookie)}, 401},
		{"API with a wrong token", req{method: "GET", path: "/v1/jobs", header: with(scriptCall, "Cookie", cookie, "X-CSRF-Token", token+"x")}, 401},
		{"API from another site", req{method: "POST", path: "/v1/jobs/" + j.ID + "/cancel", header: with(scriptCall, "Cookie", cookie, "X-CSRF-Token", token, "Sec-Fetch-Site", "cross-site")}, 401},
		{"API from another origin", req{method: "POST", path: "/v1/jobs/" + j.ID + "/cancel", header: with(scriptCall, "Cookie", cookie, "X-CSRF-Token", token, "Origin", "http://evil.example")}, 401},
		{"API navigated to", req{method: "GET", path: "/v1/jobs", header: with(navigation, "Cookie", cookie)}, 401},
		{"rows with the token", req{method: "GET", path: "/ui/rows", header: with(scriptCall, "Cookie", cookie, "X-CSRF-Token", token)}, 200},
		{"rows without", req{method: "GET", path: "/ui/rows", header: with(scriptCall, "Cookie", cookie)}, 401},
		{"sign-out without the token", req{method: "POST", path: "/ui/logout", body: "csrf=nope", header: with(navigation, "Cookie", cookie, "Content-Type", "application/x-www-form-urlencoded")}, 403},
		// SameSite=Strict keeps the cookie from another site's form, but
		// the answer's Set-Cookie, clearing it, would be taken all the same.
		{"sign-out posted by another site", req{method: "POST", path: "/ui/logout", body: "csrf=nope", header: with(navigation, "Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example")}, 403},
	} {
		c.r.noAuth = true
		if resp, body := do(t, e, c.r); resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d\n%s", c.name, resp.StatusCode, c.status, body)
		}
	}

	resp, _ := do(t, e, req{method: "POST", path: "/ui/logout", body: url.Values{"csrf": {token}}.Encode(), noAuth: true,
		header: with(navigation, "Cookie", cookie, "Content-Type", "application/x-www-form-urlencoded")})
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("sign-out: %d, Set-Cookie %q", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
}

// TestFieldProblems checks a refused submission names its fields.
func TestFieldProblems(t *testing.T) {
	e := apitest.New(t, api.Config{})
	resp, body := do(t, e, req{method: "POST", path: "/v1/jobs", body: `{"task":" ","limits":{"memory":"1k"},"model":"nope"}`})
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("status %d\n%s", resp.StatusCode, body)
	}
	for _, want := range []string{`"field":"task"`, `"field":"limits.memory"`, `"field":"model"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("error body lacks %s:\n%s", want, body)
		}
	}
	// A value of the wrong type names its field too.
	resp, body = do(t, e, req{method: "POST", path: "/v1/jobs", body: `{"task":"x","limits":{"max_steps":"many"}}`})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"field":"limits.max_steps"`) {
		t.Errorf("a wrong type: %d\n%s", resp.StatusCode, body)
	}
}

// TestSessionWithoutAuth: a server without a token has no sign-in; its
// pages carry a CSRF token all the same, which the UI's scripts need where
// a page's request would otherwise be refused.
func TestSessionWithoutAuth(t *testing.T) {
	e := apitest.New(t, api.Config{NoAuth: true})
	resp, body := do(t, e, req{method: "GET", path: "/", noAuth: true, header: navigation})
	m := csrfMeta.FindSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil || strings.Contains(string(body), `type="password"`) || strings.Contains(string(body), "Sign out") {
		t.Fatalf("GET / without auth: %d\n%s", resp.StatusCode, body)
	}
	for _, c := range []struct {
		name   string
		header map[string]string
		status int
	}{
		{"a script with the token", with(scriptCall, "X-CSRF-Token", string(m[1])), 200},
		{"a script without", scriptCall, 403},
		{"a program", nil, 200},
	} {
		if resp, body := do(t, e, req{method: "GET", path: "/v1/jobs", noAuth: true, header: c.header}); resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d\n%s", c.name, resp.StatusCode, c.status, body)
		}
	}
}

// TestDownloadNavigationNotScriptable: the files route answers a signed-in
// browser's top-level navigation without the CSRF header (the UI's
// download links), and since issue 27 that answer may be a page a browser
// shows: a directory listing (JSON), or an error naming a symlink's target.
// Without AGENTBOX_VIEW_URL a job's desktop and Jupyter pages, which the
// agent writes, share the UI's origin: one of them could window.open
// another job's listing and read it from the window it holds. Every answer
// of a download route must cut that window off (Cross-Origin-Opener-Policy,
// which the proxy never lets a sandbox's page send) and give it an opaque
// origin (CSP sandbox).
func TestDownloadNavigationNotScriptable(t *testing.T) {
	e := apitest.New(t, api.Config{})
	_, cookie := signIn(t, e, apitest.Token)
	id := endedJobWithWorkspace(t, e)
	for _, p := range []string{"files/?list", "files/src/", "files/etc/?list", "files/nothing-here", "files/hello.txt", "artifacts.zip"} {
		resp, body := do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/" + p, noAuth: true, header: with(navigation, "Cookie", cookie)})
		if resp.StatusCode == http.StatusUnauthorized {
			t.Fatalf("%s: %d, want the session's navigation let in\n%s", p, resp.StatusCode, body)
		}
		if got := resp.Header.Get("Cross-Origin-Opener-Policy"); got != "same-origin" {
			t.Errorf("%s (%d): Cross-Origin-Opener-Policy %q, want same-origin: a same-origin page that opened it keeps a handle on it", p, resp.StatusCode, got)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") {
			t.Errorf("%s (%d): Content-Security-Policy %q, want sandbox", p, resp.StatusCode, csp)
		}
	}
}
