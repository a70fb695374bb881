package testenv

import (
	"net"
	"testing"
	"time"
)

// DialFrom connects to addr over TCP from the loopback address from
// (127.0.0.x), closed when the test ends: tests of bounds per client
// address use several.
func DialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
