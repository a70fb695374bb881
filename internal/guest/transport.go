package guest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
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
		c, err := dialVsock(ctx, cid, port)
		if err != nil {
			return nil, fmt.Errorf("guest vsock %d:%d: %w", cid, port, err)
		}
		return c, nil
	}
}

// dialVsock connects without blocking a thread: the socket is non-blocking
// and the runtime's poller waits for the connect to finish, until ctx ends.
func dialVsock(ctx context.Context, cid, port uint32) (net.Conn, error) {
	fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	err = unix.Connect(fd, &unix.SockaddrVM{CID: cid, Port: port})
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		unix.Close(fd)
		return nil, fmt.Errorf("connect: %w", err)
	}
	f := os.NewFile(uintptr(fd), "vsock")
	if err := awaitConnect(ctx, f); err != nil {
		f.Close()
		return nil, err
	}
	return &vsockConn{File: f, local: vsockAddr{unix.VMADDR_CID_ANY, 0}, remote: vsockAddr{cid, port}}, nil
}

// awaitConnect waits until the non-blocking connect on f has finished and
// returns its outcome.
func awaitConnect(ctx context.Context, f *os.File) error {
	if d, ok := ctx.Deadline(); ok {
		_ = f.SetWriteDeadline(d)
		defer f.SetWriteDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var soErr int
	werr := rc.Write(func(fd uintptr) bool {
		soErr, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil || soErr != 0 {
			return true
		}
		// A vsock socket may poll writable before it is connected: only
		// a peer proves the connection.
		_, perr := unix.Getpeername(int(fd))
		return perr == nil
	})
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("connect: %w", context.Cause(ctx))
	case werr != nil:
		return fmt.Errorf("connect: %w", werr)
	case err != nil:
		return fmt.Errorf("connect: %w", err)
	case soErr != 0:
		return fmt.Errorf("connect: %w", unix.Errno(soErr))
	}
	return nil
}

// vsockConn is a connected vsock socket. The standard library's net package
// does not know AF_VSOCK, but an *os.File over a non-blocking socket reads,
// writes and honours deadlines through the runtime's poller.
type vsockConn struct {
	*os.File
	local, remote vsockAddr
}

func (c *vsockConn) LocalAddr() net.Addr  { return c.local }
func (c *vsockConn) RemoteAddr() net.Addr { return c.remote }

// vsockAddr is a vsock context ID and port.
type vsockAddr struct{ cid, port uint32 }

func (vsockAddr) Network() string { return "vsock" }
func (a vsockAddr) String() string {
	return strconv.FormatUint(uint64(a.cid), 10) + ":" + strconv.FormatUint(uint64(a.port), 10)
}
