package client

import (
	"os"
	"path/filepath"
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
		c, err := Connect(tt.url, tt.token, file)
		if err != nil || c.token != tt.want {
			t.Errorf("Connect(%q, %q): token %q, %v; want %q", tt.url, tt.token, c.token, err, tt.want)
		}
	}
	if c, err := Connect("", "", filepath.Join(t.TempDir(), "absent")); err != nil || c.token != "" || c.URL() != DefaultURL {
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
