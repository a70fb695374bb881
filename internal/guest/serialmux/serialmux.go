// Package serialmux carries many guest connections over one byte stream:
// the virtio-serial port between a virtual machine and its host, where no
// vsock device is available. Streams are multiplexed with yamux; the guest
// accepts them as a net.Listener for its HTTP server (Listen), the host
// opens them as net.Conns for guest.Client (Connect, Session.Dial).
//
// A virtio-serial port drops what the host writes before the guest has
// opened it, so the guest speaks first: it writes Hello once the port is
// open, and the host sends nothing until it has read it.
package serialmux

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/hashicorp/yamux"
)

// Hello is what the guest writes once its end of the port is open.
const Hello = "agentbox-serialmux/1\n"

// config is the yamux configuration both ends use: a wider stream window
// than yamux's 256 KiB, for file transfers, and no logging.
func config() *yamux.Config {
	c := yamux.DefaultConfig()
	c.MaxStreamWindowSize = 4 << 20
	c.LogOutput = io.Discard
	c.ConnectionWriteTimeout = 30 * time.Second
	return c
}

// Listen opens the virtio-serial port device at path (the guest's end),
// announces itself with Hello and returns a listener of the streams the
// host opens. Closing it closes the port.
func Listen(path string) (net.Listener, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("serial port: %w", err)
	}
	if _, err := io.WriteString(f, Hello); err != nil {
		f.Close()
		return nil, fmt.Errorf("serial port %s: hello: %w", path, err)
	}
	s, err := yamux.Server(f, config())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("serial port %s: %w", path, err)
	}
	return listener{s}, nil
}

// listener hands out the streams the host opens as streams with CloseWrite.
type listener struct{ *yamux.Session }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Session.AcceptStream()
	if err != nil {
		return nil, err
	}
	return stream{c}, nil
}

// stream is a yamux stream that says it can be half-closed, as a TCP or
// unix connection can: yamux's Close sends FIN and ends this end's
// writing only; reading goes on until the peer closes its own (or
// yamux's StreamCloseTimeout passes). A second Close does nothing. What
// relays a process's connection (the guest's egress) needs the half-close
// to pass EOF on without cutting the answer.
type stream struct{ *yamux.Stream }

// CloseWrite ends this end's writing; the peer reads EOF.
func (s stream) CloseWrite() error { return s.Stream.Close() }

// Session is the host's end of one guest's multiplexed port.
type Session struct {
	s *yamux.Session
}

// Connect waits, until ctx ends, for the guest's Hello on conn (the host
// side of the port) and starts multiplexing over it. The session owns conn.
func Connect(ctx context.Context, conn net.Conn) (*Session, error) {
	stop := context.AfterFunc(ctx, func() { _ = conn.SetReadDeadline(time.Unix(1, 0)) })
	buf := make([]byte, len(Hello))
	_, err := io.ReadFull(conn, buf)
	if !stop() && ctx.Err() != nil {
		conn.Close()
		return nil, fmt.Errorf("serial port: await hello: %w", context.Cause(ctx))
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("serial port: await hello: %w", err)
	}
	if string(buf) != Hello {
		conn.Close()
		return nil, fmt.Errorf("serial port: guest said %q, not %q", buf, Hello)
	}
	// The host opens every stream and accepts none: a stream the guest
	// opens is reset once one waits, so that a guest cannot park 256
	// streams of 256 KiB each (yamux's backlog and first window) in the
	// host's memory.
	c := config()
	c.AcceptBacklog = 1
	s, err := yamux.Client(conn, c)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("serial port: %w", err)
	}
	return &Session{s: s}, nil
}

// Dial opens a new stream to the guest; it is a guest.Dialer.
func (s *Session) Dial(ctx context.Context) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := s.s.OpenStream()
	if err != nil {
		return nil, fmt.Errorf("guest serial stream: %w", err)
	}
	return stream{c}, nil
}

// Done is closed when the session has ended: closed, or the guest gone.
func (s *Session) Done() <-chan struct{} { return s.s.CloseChan() }

// Close ends every stream and the session; the guest sees its port close.
func (s *Session) Close() error { return s.s.Close() }
