package egress

import (
	"context"
	"net"
)

// Terminator sees inside TLS for the hosts a job's secrets are bound to, or whose allow entry restricts methods.
type Terminator interface {
	Terminate(ctx context.Context, client net.Conn, t Termination) error
}
type Termination struct {
	Host     string
	Port     int
	Secret   string                             // the secret to inject; "" when only methods are restricted
	Upstream net.Conn                           // TCP connection to the checked address, already counted and bounded by the proxy
	Decide   func(method, path string) Decision // the policy for one request; the terminator answers 403 when !Allowed
	Seen     func(method, path string)          // the terminator reports each request it forwards (for the event's method/path)
}
