// Package daemontest serves a real guest daemon for the tests of its
// clients: the host's client, its dialers, the daemon's own routes.
package daemontest

import (
	"context"
	"net"
	"testing"

	"github.com/agentbox/agentbox/internal/guest/daemon"
)

// Serve serves a daemon configured by cfg on l until the test ends, and
// fails the test if the daemon does not then shut down cleanly.
func Serve(t testing.TB, l net.Listener, cfg daemon.Config) {
	t.Helper()
	srv, err := daemon.New(cfg)
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
}

// ServeUnix serves a daemon configured by cfg on the unix socket at path
// until the test ends.
func ServeUnix(t testing.TB, path string, cfg daemon.Config) {
	t.Helper()
	l, err := daemon.ListenUnix(path)
	if err != nil {
		t.Fatal(err)
	}
	Serve(t, l, cfg)
}
