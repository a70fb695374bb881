package egress

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEgressExamplePresets: the example presets file shipped in docs reads.
func TestEgressExamplePresets(t *testing.T) {
	p, err := ReadPresets("../../docs/egress-presets.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"python", "node", "github", "go"} {
		if len(p[name]) == 0 {
			t.Errorf("preset %s missing or empty: %v", name, p)
		}
	}
}

// TestEgressFilesBounded: a presets, secrets, CA or default policy file
// that is no regular file (a FIFO nobody writes, a link to /dev/zero) or
// too large is an error naming its variable, at once: start-up neither
// hangs nor reads without end.
func TestEgressFilesBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.json")
	if err := os.WriteFile(huge, []byte(`{"python": ["`+strings.Repeat("a", maxSettingsFile)+`"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{"AGENTBOX_EGRESS_PRESETS", "AGENTBOX_EGRESS_SECRETS", "AGENTBOX_EGRESS_CA", "AGENTBOX_EGRESS_DEFAULT"} {
		for _, path := range []string{fifo, zero, huge} {
			v := path
			if env == "AGENTBOX_EGRESS_DEFAULT" {
				v = "@" + path
			}
			done := make(chan error, 1)
			go func() {
				_, err := Load(settingsOf(env, v))
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), env) {
					t.Errorf("%s=%s: %v, want an error naming %s", env, v, err, env)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s=%s: still reading after 5s", env, v)
			}
		}
	}
}

// settingsOf is Settings with the one setting of the variable env.
func settingsOf(env, v string) Settings {
	var s Settings
	*map[string]*string{"AGENTBOX_EGRESS_PRESETS": &s.Presets, "AGENTBOX_EGRESS_SECRETS": &s.Secrets, "AGENTBOX_EGRESS_CA": &s.CA,
		"AGENTBOX_EGRESS_DEFAULT": &s.Default}[env] = v
	return s
}
