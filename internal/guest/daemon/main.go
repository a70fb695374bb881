package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/guest"
)

// ListenerFor decides where the guest listens, from `agentbox guest`'s
// --listen (default a unix socket in stateDir), and the secret it
// requires (ReadSecret of secretFile); a network listener without a
// secret of 16 characters or more is refused.
func ListenerFor(listen, stateDir, secretFile string) (guest.Listener, string, error) {
	if listen == "" {
		listen = "unix:" + filepath.Join(stateDir, guest.SocketName)
	}
	where, err := guest.ParseListen(listen)
	if err != nil {
		return where, "", err
	}
	secret, err := ReadSecret(secretFile)
	if err != nil {
		return where, "", err
	}
	if where.NeedsSecret() && len(secret) < 16 {
		return where, "", fmt.Errorf("listening on %s needs a secret of at least 16 characters (--secret-file or %s)", listen, guest.SecretEnv)
	}
	return where, secret, nil
}

// ListenAndServe serves cfg on where until ctx ends, with the sandbox's
// egress listener (ListenEgress) as cfg.Egress: without it the sandbox
// still serves the host, it just reaches nothing.
func ListenAndServe(ctx context.Context, cfg Config, where guest.Listener) error {
	egress, err := ListenEgress()
	if err != nil {
		cfg.Log.Warn("no egress listener", "err", err)
	}
	cfg.Egress = egress
	srv, err := New(cfg)
	if err != nil {
		return err
	}
	l, err := Listen(where)
	if err != nil {
		return err
	}
	cfg.Log.Info("guest listening", where.Network, l.Addr().String(), "workspace", cfg.Workspace, "uid", os.Getuid(), "secret", cfg.Secret != "")
	return srv.Serve(ctx, l)
}
