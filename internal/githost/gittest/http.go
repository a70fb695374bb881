package gittest

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// HTTP is a running git smart HTTP server (git http-backend behind
// net/http/cgi) serving the bare repositories under Root, reads and
// pushes alike, to User with Password only (HTTP basic auth, checked by
// the Go handler).
type HTTP struct {
	Root     string
	BaseURL  string // http://127.0.0.1:PORT
	User     string
	Password string
	// Denied counts requests refused for want of the right credentials.
	Denied atomic.Int64
}

// URL is the URL of repository name (a path under Root), without
// credentials.
func (s *HTTP) URL(name string) string { return s.BaseURL + "/" + filepath.ToSlash(name) }

// Path is the path of repository name on the server.
func (s *HTTP) Path(name string) string { return filepath.Join(s.Root, name) }

// StartHTTP serves until the test ends. user and password are the only
// credentials accepted; an empty password gets a random one.
func StartHTTP(t testing.TB, user, password string) *HTTP {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git: %v", err)
	}
	if password == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		password = "pw-" + hex.EncodeToString(b)
	}
	s := &HTTP{Root: t.TempDir(), User: user, Password: password}
	if err := os.MkdirAll(s.Root, 0o755); err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{Path: git, Args: []string{"http-backend"}, Dir: s.Root,
		Env: []string{"GIT_PROJECT_ROOT=" + s.Root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=" + user,
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + s.Root}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(s.User)) != 1 || subtle.ConstantTimeCompare([]byte(p), []byte(s.Password)) != 1 {
			s.Denied.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="gittest"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.BaseURL = srv.URL
	return s
}
