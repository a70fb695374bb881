package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/guest"
)

// TestListenerFor: the guest listens on its state dir's socket unless
// told otherwise, and a network listener needs a secret of 16 characters.
func TestListenerFor(t *testing.T) {
	t.Setenv(guest.SecretEnv, "")
	dir := t.TempDir()
	short, long := filepath.Join(dir, "short"), filepath.Join(dir, "long")
	os.WriteFile(short, []byte("too short\n"), 0o600)
	os.WriteFile(long, []byte("0123456789abcdef\n"), 0o600)
	where, secret, err := ListenerFor("", dir, "")
	if err != nil || where.Network != "unix" || where.Addr != filepath.Join(dir, guest.SocketName) || secret != "" {
		t.Errorf("default: %+v, %q, %v", where, secret, err)
	}
	for _, file := range []string{"", short} {
		if _, _, err := ListenerFor("tcp:127.0.0.1:0", dir, file); err == nil || !strings.Contains(err.Error(), "needs a secret of at least 16 characters") {
			t.Errorf("tcp with secret file %q: %v", file, err)
		}
	}
	where, secret, err = ListenerFor("tcp:127.0.0.1:0", dir, long)
	if err != nil || where.Network != "tcp" || secret != "0123456789abcdef" {
		t.Errorf("tcp with a secret: %+v, %q, %v", where, secret, err)
	}
}
