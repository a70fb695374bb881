package api_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
)

func TestLoadOrCreateToken(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data", "agentbox")
	tok, path, created, err := api.LoadOrCreateToken(dir)
	if err != nil || !created || path != filepath.Join(dir, "token") {
		t.Fatalf("first call: %q %q %v %v", tok, path, created, err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(tok) {
		t.Errorf("token %q is not 32 random bytes in hex", tok)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	again, _, created, err := api.LoadOrCreateToken(dir)
	if err != nil || created || again != tok {
		t.Errorf("second call: %q created=%v err=%v, want the same token", again, created, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("data dir holds %d entries, want only the token (no temp files)", len(entries))
	}
}

func TestLoadOrCreateTokenReadsAGivenFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("  my-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, _, created, err := api.LoadOrCreateToken(dir); tok != "my-token" || created || err != nil {
		t.Errorf("got %q %v %v", tok, created, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := api.LoadOrCreateToken(dir); err == nil {
		t.Error("an empty token file was accepted")
	}
}

func TestLoadOrCreateTokenRace(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	toks := make([]string, 8)
	for i := range toks {
		wg.Go(func() {
			tok, _, _, err := api.LoadOrCreateToken(dir)
			if err != nil {
				t.Error(err)
			}
			toks[i] = tok
		})
	}
	wg.Wait()
	for _, tok := range toks {
		if tok != toks[0] {
			t.Fatalf("racing callers got different tokens: %v", toks)
		}
	}
}

func TestLoadTokenRefusesReadableFile(t *testing.T) {
	dir := t.TempDir()
	if _, _, _, err := api.LoadOrCreateToken(dir); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, api.TokenFile)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, _, err := api.LoadOrCreateToken(dir)
	if err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("err = %v, want a refusal naming chmod 600", err)
	}
}
