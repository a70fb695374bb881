package forge

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// remoteSchemes are the URL schemes of a hosted repository's remote.
var remoteSchemes = map[string]bool{
	"https": true, "http": true, "ssh": true, "git+ssh": true, "ssh+git": true, "git": true,
}

// ParseRemote splits a git remote URL into its host (host[:port], lower
// case), owner and repository: https://host/owner/repo(.git),
// ssh://git@host[:port]/owner/repo.git, or the scp-like git@host:owner/repo.git.
// Local paths and file:// URLs are not hosted repositories and are refused.
func ParseRemote(url string) (host, owner, repo string, err error) {
	host, path, err := splitRemote(url)
	if err != nil {
		return "", "", "", err
	}
	owner, repo, err = ownerRepo(path)
	if err != nil {
		return "", "", "", err
	}
	return host, owner, repo, nil
}

// splitRemote splits a remote URL into its host and its path.
func splitRemote(raw string) (host, path string, err error) {
	raw = strings.TrimSpace(raw)
	switch {
	case raw == "":
		return "", "", errors.New("empty remote URL")
	case strings.Contains(raw, "://"):
		host, path, err = splitURL(raw)
	default:
		host, path, err = splitSCP(raw)
	}
	if err != nil {
		return "", "", fmt.Errorf("remote %q: %w", redact(raw), err)
	}
	return host, path, nil
}

// splitURL splits scheme://[user@]host[:port]/path.
func splitURL(raw string) (host, path string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", errors.New("not a URL")
	}
	if !remoteSchemes[strings.ToLower(u.Scheme)] {
		return "", "", fmt.Errorf("scheme %q is not a hosted repository's (want https, http or ssh)", u.Scheme)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", "", errors.New("a remote URL has no query or fragment")
	}
	host = strings.ToLower(u.Host)
	if err := checkHost(host); err != nil {
		return "", "", err
	}
	return host, u.Path, nil
}

// splitSCP splits git's scp-like form, [user@]host:path, which git
// recognises by a colon before any slash.
func splitSCP(raw string) (host, path string, err error) {
	colon := strings.IndexByte(raw, ':')
	slash := strings.IndexByte(raw, '/')
	if colon <= 0 || (slash >= 0 && slash < colon) {
		return "", "", errors.New("not a hosted repository's URL (a local path?)")
	}
	userHost, path := raw[:colon], raw[colon+1:]
	host = strings.ToLower(userHost[strings.LastIndexByte(userHost, '@')+1:])
	if strings.ContainsAny(host, "[]") {
		return "", "", errors.New("use ssh://[address]/owner/repo for an IPv6 address")
	}
	if err := checkHost(host); err != nil {
		return "", "", err
	}
	return host, path, nil
}

// ownerRepo takes owner and repository from a remote's path:
// "/owner/repo.git", "owner/repo", "/owner/repo/".
func ownerRepo(path string) (owner, repo string, err error) {
	p := strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	parts := strings.Split(p, "/")
	if len(parts) != 2 {
		return "", "", fmt.Errorf("remote path %q: want owner/repository", path)
	}
	if err := checkName("owner", parts[0]); err != nil {
		return "", "", err
	}
	if err := checkName("repository", parts[1]); err != nil {
		return "", "", err
	}
	return parts[0], parts[1], nil
}

// checkName accepts the names GitHub and Gitea give owners and
// repositories: letters, digits, '-', '_' and '.', not "." or "..".
func checkName(what, name string) error {
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("%s name %q is not valid", what, name)
	}
	for _, r := range name {
		if !isAlnum(r) && r != '-' && r != '_' && r != '.' {
			return fmt.Errorf("%s name %q has %q (want letters, digits, '-', '_', '.')", what, name, r)
		}
	}
	return nil
}

// checkHost accepts host[:port], where host is a DNS name or an IP
// address (IPv6 in brackets) and port a number.
func checkHost(host string) error {
	name := host
	switch {
	case strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]"):
		name = host[1 : len(host)-1]
		if net.ParseIP(name) == nil {
			return fmt.Errorf("host %q: not an IPv6 address", host)
		}
	case strings.Contains(host, ":"):
		h, p, err := net.SplitHostPort(host)
		if err != nil || !isPort(p) {
			return fmt.Errorf("host %q: want host[:port]", host)
		}
		name = h
	}
	if net.ParseIP(name) != nil || isDNSName(name) {
		return nil
	}
	return fmt.Errorf("host %q is not a host name", host)
}

// isDNSName accepts letters, digits, '-' and '.', in labels that are not
// empty and do not start with '-'.
func isDNSName(name string) bool {
	for _, label := range strings.Split(name, ".") {
		if label == "" || label[0] == '-' {
			return false
		}
		for _, r := range label {
			if !isAlnum(r) && r != '-' {
				return false
			}
		}
	}
	return true
}

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

func isPort(p string) bool {
	if len(p) == 0 || len(p) > 5 {
		return false
	}
	n := 0
	for _, r := range p {
		if r < '0' || r > '9' {
			return false
		}
		n = n*10 + int(r-'0')
	}
	return n > 0 && n < 65536
}

// hostname is host without its port.
func hostname(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.Trim(host, "[]")
}

// redact hides a URL's user information (a password or token someone put
// there) so it never reaches an error message.
func redact(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	authority, path, _ := strings.Cut(rest, "/")
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		authority = "xxxxx@" + authority[at+1:]
	}
	if path == "" && !strings.Contains(rest, "/") {
		return scheme + "://" + authority
	}
	return scheme + "://" + authority + "/" + path
}
