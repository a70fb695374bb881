package egress

import (
	"net/url"
	"strings"
)

// SandboxEnv is the environment that points a sandbox's programs at its
// proxy, proxyURL ("http://127.0.0.1:PORT"): HTTP_PROXY and HTTPS_PROXY,
// ALL_PROXY as socks5h:// to the same host and port (names resolved by
// the proxy), each also lower case, and NO_PROXY for the loopback. When
// caBundle (a path inside the sandbox) is set, the variables that make
// common tools trust it (the CA of the hosts the proxy terminates).
func SandboxEnv(proxyURL, caBundle string) map[string]string {
	socks := proxyURL
	if u, err := url.Parse(proxyURL); err == nil && u.Host != "" {
		socks = "socks5h://" + u.Host
	} else {
		socks = "socks5h://" + strings.TrimPrefix(proxyURL, "http://")
	}
	env := map[string]string{}
	for k, v := range map[string]string{
		"HTTP_PROXY":  proxyURL,
		"HTTPS_PROXY": proxyURL,
		"ALL_PROXY":   socks,
		"NO_PROXY":    "localhost,127.0.0.1",
	} {
		env[k] = v
		env[strings.ToLower(k)] = v
	}
	if caBundle != "" {
		for _, k := range []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "PIP_CERT", "GIT_SSL_CAINFO", "CURL_CA_BUNDLE"} {
			env[k] = caBundle
		}
	}
	return env
}
