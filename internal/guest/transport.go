package guest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"

	"github.com/agentbox/agentbox/internal/guest/vsock"
)

// SecretHeader carries a sandbox's own secret on every request to its
// guest. A guest listening on a network (TCP) answers 401 to a request
// without it; on a unix socket or vsock, which only the host can reach, the
// secret is optional.
const SecretHeader = "Agentbox-Guest-Secret"

// Dialer opens a new connection to one guest.
type Dialer func(ctx context.Context) (net.Conn, error)

// UnixDialer connects to the guest's unix socket at path. The socket's
// directory is trusted; the socket itself is never reached through a link.
func UnixDialer(path string) Dialer { return UnixDialerAt(filepath.Dir(path), filepath.Base(path)) }

// UnixDialerAt connects to the guest's unix socket rel beneath dir. dir is
// the host's own; every component of rel may have been written by the
// sandbox, so the dialer connects only if each is a real directory and the
// last a socket, never following a link, and fails with ErrUnsafeSocket
// otherwise.
func UnixDialerAt(dir, rel string) Dialer { return newSocketDialer(dir, rel).dial }

// TCPDialer connects to a guest listening on TCP at addr (host:port).
func TCPDialer(addr string) Dialer {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("guest tcp %s: %w", addr, err)
		}
		return c, nil
	}
}

// VsockDialer connects to a guest listening on vsock port in the virtual
// machine with context ID cid.
func VsockDialer(cid, port uint32) Dialer {
	return func(ctx context.Context) (net.Conn, error) {
		c, err := vsock.Dial(ctx, cid, port)
		if err != nil {
			return nil, fmt.Errorf("guest vsock %d:%d: %w", cid, port, err)
		}
		return c, nil
	}
}
