package client

import (
	"cmp"
	"net"
	"net/url"
	"os"
	"strings"
)

// DefaultURL is the server of a client configured with none: a local
// agentbox serve on its default address.
const DefaultURL = "http://127.0.0.1:8080"

// Connect returns a client of baseURL (DefaultURL if empty) that sends
// token. With no token, a client of a loopback address sends the one a
// local server generated in tokenFile, if this user can read it; that
// token never goes to another host.
func Connect(baseURL, token, tokenFile string) (*Client, error) {
	baseURL = cmp.Or(baseURL, DefaultURL)
	if token == "" && loopback(baseURL) {
		if b, err := os.ReadFile(tokenFile); err == nil {
			token = strings.TrimSpace(string(b))
		}
	}
	return New(baseURL, token)
}

// loopback reports whether the URL's host is this machine's loopback.
func loopback(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	ip := net.ParseIP(u.Hostname())
	return u.Hostname() == "localhost" || (ip != nil && ip.IsLoopback())
}
