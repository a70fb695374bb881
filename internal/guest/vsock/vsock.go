// Package vsock owns AF_VSOCK stream sockets as net.Conn and net.Listener:
// how a host reaches the guest in a virtual machine (Dial) and how that
// guest listens (Listen). The standard library's net package does not know
// AF_VSOCK, but an *os.File over a non-blocking socket reads, writes,
// accepts and honours deadlines through the runtime's poller, so no thread
// blocks on a socket.
package vsock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Addr is a vsock context ID and port.
type Addr struct{ CID, Port uint32 }

// Network is "vsock".
func (Addr) Network() string { return "vsock" }

// String is "CID:PORT".
func (a Addr) String() string {
	return strconv.FormatUint(uint64(a.CID), 10) + ":" + strconv.FormatUint(uint64(a.Port), 10)
}

// Dial connects to port in the virtual machine with context ID cid, until
// ctx ends.
func Dial(ctx context.Context, cid, port uint32) (net.Conn, error) {
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
	return &conn{File: f, local: Addr{unix.VMADDR_CID_ANY, 0}, remote: Addr{cid, port}}, nil
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

// conn is a connected vsock socket.
type conn struct {
	*os.File
	local, remote Addr
}

func (c *conn) LocalAddr() net.Addr  { return c.local }
func (c *conn) RemoteAddr() net.Addr { return c.remote }

// CloseWrite shuts down the sending half: the peer reads EOF and may still
// answer (a connection the guest carries for a process is half-closed like
// TCP).
func (c *conn) CloseWrite() error {
	rc, err := c.File.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Shutdown(int(fd), unix.SHUT_WR) }); err != nil {
		return err
	}
	return serr
}

// Listen listens on a vsock port of this virtual machine, any CID.
func Listen(port uint32) (net.Listener, error) {
	fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("vsock socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrVM{CID: unix.VMADDR_CID_ANY, Port: port}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("vsock bind port %d: %w", port, err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("vsock listen: %w", err)
	}
	return &listener{f: os.NewFile(uintptr(fd), "vsock-listener"), addr: Addr{unix.VMADDR_CID_ANY, port}}, nil
}

// listener accepts vsock connections through the runtime's poller.
type listener struct {
	f    *os.File
	addr Addr
	once sync.Once
}

func (l *listener) Accept() (net.Conn, error) {
	rc, err := l.f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var nfd int
	var sa unix.Sockaddr
	rerr := rc.Read(func(fd uintptr) bool {
		nfd, sa, err = unix.Accept4(int(fd), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		return !errors.Is(err, unix.EAGAIN)
	})
	if rerr != nil {
		return nil, fmt.Errorf("vsock accept: %w", net.ErrClosed)
	}
	if err != nil {
		return nil, fmt.Errorf("vsock accept: %w", err)
	}
	remote := Addr{}
	if vm, ok := sa.(*unix.SockaddrVM); ok {
		remote = Addr{vm.CID, vm.Port}
	}
	return &conn{File: os.NewFile(uintptr(nfd), "vsock"), local: l.addr, remote: remote}, nil
}

func (l *listener) Close() error {
	var err error
	l.once.Do(func() { err = l.f.Close() })
	return err
}

func (l *listener) Addr() net.Addr { return l.addr }
