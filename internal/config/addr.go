package config

import "net"

// IsLoopback reports whether the host of addr (host:port) is localhost or a
// loopback IP: the only addresses a server may listen on without auth, and
// the only servers a client sends the local server's token to.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
