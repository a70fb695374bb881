package wiring

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/config"
)

var discard = slog.New(slog.DiscardHandler)

func TestViewerKeyFile(t *testing.T) {
	var cfg config.Config
	cfg.DataDir = t.TempDir()
	k1, err := viewerKey(cfg, discard)
	if err != nil || len(k1) < 32 {
		t.Fatalf("generated key %q: %v", k1, err)
	}
	if k2, err := viewerKey(cfg, discard); err != nil || string(k2) != string(k1) {
		t.Errorf("second start: %q %v, want the same key", k2, err)
	}
	dir := t.TempDir()
	for name, tt := range map[string]struct {
		content string
		mode    os.FileMode
		want    string
	}{
		"missing":          {want: "no such file"},
		"short":            {content: "0123456789", mode: 0o600, want: "want at least 32"},
		"readable by all":  {content: strings.Repeat("k", 40), mode: 0o644, want: "readable by others"},
		"a good key works": {content: strings.Repeat("k", 40) + "\n", mode: 0o600},
	} {
		t.Run(name, func(t *testing.T) {
			cfg.Server.ViewerKeyFile = filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			if tt.mode != 0 {
				if err := os.WriteFile(cfg.Server.ViewerKeyFile, []byte(tt.content), tt.mode); err != nil {
					t.Fatal(err)
				}
			}
			key, err := viewerKey(cfg, discard)
			if tt.want == "" {
				if err != nil || string(key) != strings.Repeat("k", 40) {
					t.Errorf("key %q, %v", key, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestServerTokens(t *testing.T) {
	tests := []struct {
		name, addr string
		noAuth     bool
		tokenFile  string
		want       string // in the error; empty: a token is generated
	}{
		{name: "generated on a public address", addr: "0.0.0.0:8080"},
		{name: "generated on loopback", addr: "127.0.0.1:8080"},
		{name: "no-auth refused off loopback", addr: "0.0.0.0:8080", noAuth: true, want: "only loopback"},
		{name: "empty token file", addr: "127.0.0.1:8080", tokenFile: "empty", want: "is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg config.Config
			cfg.DataDir = t.TempDir()
			cfg.Server.Addr, cfg.Server.NoAuth = tt.addr, tt.noAuth
			if tt.tokenFile != "" {
				cfg.Server.TokenFile = filepath.Join(t.TempDir(), "tok")
				os.WriteFile(cfg.Server.TokenFile, nil, 0o600)
			}
			tokens, err := serverTokens(cfg, discard)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil || len(tokens) != 1 || len(tokens[0]) < 32 {
				t.Fatalf("tokens %q, %v", tokens, err)
			}
			fi, err := os.Stat(filepath.Join(cfg.DataDir, "token"))
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("token file: %v %v, want mode 0600", fi, err)
			}
		})
	}
	var cfg config.Config
	cfg.Server.Addr, cfg.Server.NoAuth = "localhost:8080", true
	if tokens, err := serverTokens(cfg, discard); err != nil || tokens != nil {
		t.Errorf("no-auth on loopback: %q %v", tokens, err)
	}
}
