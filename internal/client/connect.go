package client

import (
	"cmp"
	"errors"
	"io/fs"
	"net"
	"net/url"
	"os"
	"strings"
)

// DefaultURL is the server of a client configured with none: a local
// agentbox serve on its default address.
const DefaultURL = "http://127.0.0.1:8080"

// Token is the bearer token a client sends and where it came from. A
// token the server refuses (401) is named by its source, never by its
// value.
type Token struct {
	Value string
	// From is where Value came from: a flag ("--token"), an environment
	// variable ("AGENTBOX_TOKEN") or a file's path.
	From string
}

// Connect returns a client of baseURL (DefaultURL if empty) that sends
// tok. With no token, a client of a loopback address sends the one a
// local server generated in tokenFile, if this user can read it; that
// token never goes to another host. Should the server refuse what was
// sent, its error says which token it was, or why none was, and what to
// do.
func Connect(baseURL string, tok Token, tokenFile string) (*Client, error) {
	baseURL = cmp.Or(baseURL, DefaultURL)
	var none string // why no token is sent
	switch {
	case tok.Value != "":
	case !loopback(baseURL):
		none = "a local server's token file is sent only to a loopback address; give the token with --token or AGENTBOX_TOKEN"
	default:
		tok, none = readToken(tokenFile)
	}
	c, err := New(baseURL, tok.Value)
	if err != nil {
		return nil, err
	}
	if tok.Value != "" {
		c.tried, c.advice = "refused "+tok.described(), tok.advice()
	} else {
		c.tried, c.advice = "wants a token and none was sent", none
	}
	return c, nil
}

// readToken reads a local server's token file, or says why it could not.
func readToken(file string) (Token, string) {
	const give = "give its token with --token or AGENTBOX_TOKEN"
	b, err := os.ReadFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Token{}, "there is no " + file + "; give the server's data directory with --data-dir or AGENTBOX_DATA_DIR (agentbox serve logs its token file's path as it starts; one started with sudo keeps it under root's home), or " + give
	case errors.Is(err, fs.ErrPermission):
		return Token{}, file + " cannot be read by this user (permission denied); run as the server's user (e.g. with sudo), or " + give
	case err != nil:
		return Token{}, "reading " + file + ": " + err.Error() + "; " + give
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return Token{}, file + " is empty; " + give
	}
	return Token{Value: v, From: file}, ""
}

// described names the token by its source: "the token from AGENTBOX_TOKEN".
func (t Token) described() string {
	switch {
	case t.From == "":
		return "the token given"
	case strings.HasPrefix(t.From, "-"):
		return "the token given with " + t.From
	case strings.ContainsRune(t.From, os.PathSeparator):
		return "the token in " + t.From
	}
	return "the token from " + t.From
}

// advice is what to do when the server refuses the token.
func (t Token) advice() string {
	switch {
	case strings.HasPrefix(t.From, "-"):
		return "give this server's token: its AGENTBOX_TOKEN, or the token file in its data directory"
	case strings.ContainsRune(t.From, os.PathSeparator):
		return "it is another server's; give this server's data directory with --data-dir or AGENTBOX_DATA_DIR, or its token with --token or AGENTBOX_TOKEN"
	case t.From != "":
		return "set " + t.From + " to this server's token, or unset it to send a local server's token file"
	}
	return "give this server's token"
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
