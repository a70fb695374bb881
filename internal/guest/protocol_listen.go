package guest

import (
	"fmt"
	"strconv"
	"strings"
)

// Where the guest listens and what it then requires: the driver chooses the
// transport and starts the guest with --listen; the daemon opens it.

// CodeUnauthorized is the error code of a request that lacks the sandbox's
// secret.
const CodeUnauthorized = "unauthorized"

// SecretEnv is the environment variable a guest may take its secret from
// when no secret file is given (a Kubernetes Secret, for one).
const SecretEnv = "AGENTBOX_GUEST_SECRET"

// Listener is where the guest answers, parsed from its --listen address.
type Listener struct {
	// Network is "unix", "tcp" or "vsock".
	Network string
	// Addr is the socket's path, the TCP host:port, or the vsock port.
	Addr string
}

// ParseListen reads "unix:PATH", "tcp:HOST:PORT" or "vsock:PORT".
func ParseListen(s string) (Listener, error) {
	network, addr, ok := strings.Cut(s, ":")
	if !ok || addr == "" {
		return Listener{}, fmt.Errorf("listen address %q: want unix:PATH, tcp:HOST:PORT or vsock:PORT", s)
	}
	switch network {
	case "unix", "tcp":
	case "vsock":
		if _, err := strconv.ParseUint(addr, 10, 32); err != nil {
			return Listener{}, fmt.Errorf("listen address %q: vsock port must be a number", s)
		}
	default:
		return Listener{}, fmt.Errorf("listen address %q: unknown network %q (unix, tcp or vsock)", s, network)
	}
	return Listener{Network: network, Addr: addr}, nil
}

// NeedsSecret says whether requests arriving here must carry the secret:
// anything on a network may come from someone other than the host.
func (l Listener) NeedsSecret() bool { return l.Network == "tcp" }
