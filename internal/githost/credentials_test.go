package githost_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/githost"
)

// tokenTrap is an HTTP server that asks every request for credentials
// and keeps the Authorization headers it is sent.
type tokenTrap struct {
	*httptest.Server
	mu   sync.Mutex
	auth []string
}

func startTokenTrap(t *testing.T) *tokenTrap {
	tr := &tokenTrap{}
	tr.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			tr.mu.Lock()
			tr.auth = append(tr.auth, a)
			tr.mu.Unlock()
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="trap"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
	}))
	t.Cleanup(tr.Close)
	return tr
}

func (tr *tokenTrap) sent() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.auth...)
}

// An allowed host that redirects to another one (a compromised or hostile
// server, a job's URL on a host that redirects where it is told) must not
// get the token sent to the other host: git asks the credential helper
// again for the redirect's host.
func TestTokenNotSentAfterRedirectToAnotherHost(t *testing.T) {
	const token = "tok-redirect-0123456789"
	trap := startTokenTrap(t)
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, trap.URL+r.URL.RequestURI(), http.StatusFound)
	}))
	t.Cleanup(allowed.Close)
	h := newHost(t, githost.Config{Token: token, TokenHosts: []string{strings.TrimPrefix(allowed.URL, "http://")}})
	if _, _, _, err := clone(t, h, allowed.URL+"/r.git", ""); err == nil {
		t.Fatal("clone from a trap succeeded")
	}
	if got := trap.sent(); len(got) > 0 {
		t.Fatalf("the redirect's host got credentials: %q", got)
	}
}

// The token goes over https, or http to a loopback host only: plain http
// to any other address hands it to whoever is on the path. 0.0.0.0
// reaches the trap on 127.0.0.1, but is not a loopback address.
func TestTokenNotSentOverPlainHTTP(t *testing.T) {
	const token = "tok-plainhttp-0123456789"
	trap := startTokenTrap(t)
	h := newHost(t, githost.Config{Token: token})
	url := strings.Replace(trap.URL, "127.0.0.1", "0.0.0.0", 1) + "/r.git"
	if _, _, _, err := clone(t, h, url, ""); err == nil {
		t.Fatal("clone from a trap succeeded")
	}
	if got := trap.sent(); len(got) > 0 {
		t.Fatalf("the token went over plain http to %s: %q", url, got)
	}
}
