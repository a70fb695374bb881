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
	// Network is "unix", "tcp", "vsock" or "serial".
	Network string
	// Addr is the socket's path, the TCP host:port, the vsock port, or
	// the path of a virtio-serial port's device (whose streams are
	// multiplexed, see SerialHello).
	Addr string
}

// ParseListen reads "unix:PATH", "tcp:HOST:PORT", "vsock:PORT" or
// "serial:DEVICE".
func ParseListen(s string) (Listener, error) {
	network, addr, ok := strings.Cut(s, ":")
	if !ok || addr == "" {
		return Listener{}, fmt.Errorf("listen address %q: want unix:PATH, tcp:HOST:PORT, vsock:PORT or serial:DEVICE", s)
	}
	switch network {
	case "unix", "tcp", "serial":
	case "vsock":
		if _, err := strconv.ParseUint(addr, 10, 32); err != nil {
			return Listener{}, fmt.Errorf("listen address %q: vsock port must be a number", s)
		}
	default:
		return Listener{}, fmt.Errorf("listen address %q: unknown network %q (unix, tcp, vsock or serial)", s, network)
	}
	return Listener{Network: network, Addr: addr}, nil
}

// NeedsSecret says whether requests arriving here must carry the secret:
// anything on a network may come from someone other than the host.
func (l Listener) NeedsSecret() bool { return l.Network == "tcp" }
