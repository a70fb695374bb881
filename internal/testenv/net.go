package testenv

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"
)

// DialFrom connects to addr over TCP from the loopback address from
// (127.0.0.x), closed when the test ends: tests of bounds per client
// address use several.
func DialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	return dial(t, addr, net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}})
}

// DialTiny is DialFrom with a receive buffer of 2 KiB, as a client that
// means to stop reading what it is sent does.
func DialTiny(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	return dial(t, addr, net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)},
		Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2<<10) })
			return errors.Join(err, serr)
		}})
}

func dial(t *testing.T, addr string, d net.Dialer) net.Conn {
	t.Helper()
	d.Timeout = 5 * time.Second
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
