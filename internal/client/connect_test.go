package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConnectReadsTheLocalTokenForLoopbackOnly: the token file of a local
// server is sent to loopback addresses only, and a configured token wins.
func TestConnectReadsTheLocalTokenForLoopbackOnly(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("local-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ url, token, want string }{
		{"", "", "local-token"},
		{"http://localhost:9000", "", "local-token"},
		{"http://[::1]:9000", "", "local-token"},
		{"http://127.0.0.2:9000", "given", "given"},
		{"https://agentbox.example.com", "", ""},
		{"http://10.0.0.1:8080", "", ""},
	}
	for _, tt := range tests {
		c, err := Connect(tt.url, Token{Value: tt.token, From: "--token"}, file)
		if err != nil || c.token != tt.want {
			t.Errorf("Connect(%q, %q): token %q, %v; want %q", tt.url, tt.token, c.token, err, tt.want)
		}
	}
	if c, err := Connect("", Token{}, filepath.Join(t.TempDir(), "absent")); err != nil || c.token != "" || c.URL() != DefaultURL {
		t.Errorf("without a token file: %+v, %v", c, err)
	}
}

func TestLocalTokenStaysLocal(t *testing.T) {
	for url, want := range map[string]bool{"http://127.0.0.1:8080": true, "http://localhost:9": true, "http://[::1]:8080": true,
		"https://agentbox.example.com": false, "http://10.0.0.5:8080": false} {
		if got := loopback(url); got != want {
			t.Errorf("loopback(%q) = %v, want %v", url, got, want)
		}
	}
}

// TestRefusedTokenIsNamedBySource: a 401 says which token was sent, by
// where it came from, or why none was, and what to do; never the token.
func TestRefusedTokenIsNamedBySource(t *testing.T) {
	const secret = "s3cret-token-value"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		// A server echoing the token must not get it printed either.
		w.Write([]byte(`{"error":{"code":"unauthorized","message":"missing or invalid bearer token ` + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + `"}}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	os.WriteFile(file, []byte(secret+"\n"), 0o600)
	unreadable := filepath.Join(dir, "locked")
	os.WriteFile(unreadable, []byte(secret), 0o000)
	tests := []struct {
		name string
		tok  Token
		file string
		want []string
	}{
		{"flag", Token{secret, "--token"}, file, []string{"refused the token given with --token", "this server's token"}},
		{"env", Token{secret, "AGENTBOX_TOKEN"}, file, []string{"refused the token from AGENTBOX_TOKEN", "unset it"}},
		{"file", Token{}, file, []string{"refused the token in " + file, "--data-dir"}},
		{"no file", Token{}, filepath.Join(dir, "absent"), []string{"none was sent", "there is no " + filepath.Join(dir, "absent"), "--data-dir"}},
	}
	tests = append(tests, struct {
		name string
		tok  Token
		file string
		want []string
	}{"unreadable", Token{}, unreadable, []string{"none was sent", unreadable + " cannot be read by this user", "--token"}})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.file == unreadable && os.Geteuid() == 0 {
				t.Skip("root reads any file: no unreadable token file here")
			}
			c, err := Connect(srv.URL, tt.tok, tt.file)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Get(context.Background(), "job_x")
			if err == nil {
				t.Fatal("no error for a 401")
			}
			msg := err.Error()
			for _, w := range append(tt.want, "the server at "+srv.URL) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			if strings.Contains(msg, secret) {
				t.Errorf("error %q shows the token", msg)
			}
		})
	}
}

// TestNotFoundRepeatsTheJob: a 404 for a job names it and the server; one
// for a file of a job that exists stays the server's message.
func TestNotFoundRepeatsTheJob(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		msg := "no such job"
		if strings.Contains(r.URL.Path, "/files/") {
			msg = "no such file"
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":{"code":"not_found","message":"` + msg + `"}}`))
	}))
	defer srv.Close()
	c, err := New(srv.URL, "t")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Get(ctx, "abc123"); err == nil || err.Error() != "no job abc123 on "+srv.URL {
		t.Errorf("Get: %v", err)
	}
	if _, err := c.Events(ctx, "job/odd", 0, 0); err == nil || err.Error() != "no job job/odd on "+srv.URL {
		t.Errorf("Events: %v", err)
	}
	if _, err := c.GetFile(ctx, "abc123", "a.txt", nil); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("GetFile: %v", err)
	}
}
