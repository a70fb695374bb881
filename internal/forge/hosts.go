package forge

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// ParseHosts parses the operator's list of services (AGENTBOX_GIT_HOSTS):
// comma-separated entries KIND=HOST[=APIBASE], for example
//
//	github=ghe.example.com=https://ghe.example.com/api/v3,gitea=git.example.com:3000
//
// KIND is "github" or "gitea" ("forgejo" is accepted as "gitea"). HOST is
// host[:port] as in the clone URL. APIBASE defaults to
// https://api.github.com for github.com, https://HOST/api/v3 for another
// GitHub (Enterprise) host and https://HOST/api/v1 for Gitea; it must be
// https unless its host is a loopback address. github.com is added with its
// default API when the spec does not name it. The Tokens are left empty:
// the caller sets AGENTBOX_GIT_TOKEN on every Host.
func ParseHosts(spec string) ([]Host, error) {
	var hosts []Host
	seen := map[string]bool{}
	for _, entry := range strings.Split(spec, ",") {
		if entry = strings.TrimSpace(entry); entry == "" {
			continue
		}
		h, err := parseHost(entry)
		if err != nil {
			return nil, fmt.Errorf("AGENTBOX_GIT_HOSTS entry %q: %w", redact(entry), err)
		}
		if seen[h.Host] {
			return nil, fmt.Errorf("AGENTBOX_GIT_HOSTS: host %q is listed twice", h.Host)
		}
		seen[h.Host] = true
		hosts = append(hosts, h)
	}
	return withDefaults(hosts), nil
}

// parseHost parses one KIND=HOST[=APIBASE].
func parseHost(entry string) (Host, error) {
	parts := strings.SplitN(entry, "=", 3)
	if len(parts) < 2 {
		return Host{}, errors.New("want KIND=HOST[=APIBASE]")
	}
	kind, err := parseKind(parts[0])
	if err != nil {
		return Host{}, err
	}
	host := strings.ToLower(strings.TrimSpace(parts[1]))
	if host == "" {
		return Host{}, errors.New("empty host")
	}
	if strings.Contains(host, "/") || strings.Contains(host, "@") {
		return Host{}, fmt.Errorf("host %q: want host[:port] as in the clone URL, not a URL", host)
	}
	if err := checkHost(host); err != nil {
		return Host{}, err
	}
	h := Host{Kind: kind, Host: host, APIBase: defaultAPIBase(kind, host)}
	if len(parts) == 3 {
		h.APIBase = strings.TrimRight(strings.TrimSpace(parts[2]), "/")
	}
	return h, checkAPIBase(h.APIBase)
}

func parseKind(s string) (Kind, error) {
	switch k := Kind(strings.ToLower(strings.TrimSpace(s))); k {
	case KindGitHub, KindGitea:
		return k, nil
	case "forgejo":
		return KindGitea, nil
	}
	return "", fmt.Errorf("unknown kind %q (want github, gitea or forgejo)", s)
}

// defaultAPIBase is where a kind of service serves its API on host.
func defaultAPIBase(kind Kind, host string) string {
	switch {
	case kind == KindGitea:
		return "https://" + host + "/api/v1"
	case host == defaultGitHub.Host:
		return defaultGitHub.APIBase
	}
	return "https://" + host + "/api/v3"
}

// withDefaults copies hosts with their names in lower case and adds
// github.com when no entry names github.com.
func withDefaults(hosts []Host) []Host {
	out := make([]Host, 0, len(hosts)+1)
	github := false
	for _, h := range hosts {
		h.Host = strings.ToLower(h.Host)
		github = github || h.Host == defaultGitHub.Host
		out = append(out, h)
	}
	if !github {
		out = append(out, defaultGitHub)
	}
	return out
}

// checkAPIBase accepts an absolute https URL with no user information,
// query or fragment; http only on a loopback host, where the token never
// crosses a network.
func checkAPIBase(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || !u.IsAbs() {
		return fmt.Errorf("API base %q is not an absolute URL", redact(raw))
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("API base %q: no user, query or fragment allowed (the token is set separately)", redact(raw))
	}
	return checkSecure(u)
}

// checkSecure refuses a URL the token must not be sent to: anything but
// https, except http to a loopback host.
func checkSecure(u *url.URL) error {
	switch strings.ToLower(u.Scheme) {
	case "https":
		return nil
	case "http":
		if isLoopback(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("API URL %q: http is allowed only on a loopback host; use https", redact(u.String()))
	}
	return fmt.Errorf("API URL %q: scheme %q (want https)", redact(u.String()), u.Scheme)
}

func isLoopback(name string) bool {
	if strings.EqualFold(name, "localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// checkRedirect follows at most 5 redirects, never to a URL the token
// must not be sent to. (net/http drops the Authorization header itself on
// a redirect to another host.)
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
	}
	return checkSecure(req.URL)
}
