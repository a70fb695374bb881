package githost

import (
	"cmp"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// tokenHelper is the credential helper that answers with the token: git
// runs it through the shell, and it reads the token from its own
// environment, so the token is in no argument, file or config value. It
// answers only for the remote's own protocol and host: git asks again for
// the host an HTTP redirect leads to (another host, or http), which must
// not get the token.
const tokenHelper = `!f() { test "$1" = get || exit 0; p= h=; ` +
	`while IFS= read -r l; do case "$l" in protocol=*) p=${l#protocol=};; host=*) h=${l#host=};; esac; done; ` +
	`test "$p" = "$AGENTBOX_GITHOST_PROTOCOL" && test "$h" = "$AGENTBOX_GITHOST_HOST" || exit 0; ` +
	`printf 'username=%s\npassword=%s\n' "$AGENTBOX_GITHOST_USER" "$AGENTBOX_GITHOST_TOKEN"; }; f`

// credentials adds to one run's config and environment what it needs to
// reach rm with the host's credentials. Runs with a remote also read the
// host's global git config (its credential helper, url rewrites, proxy);
// safeConfig still overrides it.
func (h *Host) credentials(rm remote, conf [][2]string, env []string) ([][2]string, []string) {
	switch rm.kind {
	case kindHTTP:
		if h.cfg.Token != "" && h.tokenFor(rm) {
			// The empty value drops the host's helpers: the token answers alone.
			conf = append(conf, [2]string{"credential.helper", ""}, [2]string{"credential.helper", tokenHelper})
			env = append(env, "AGENTBOX_GITHOST_USER="+cmp.Or(rm.user, h.cfg.TokenUser), "AGENTBOX_GITHOST_TOKEN="+h.cfg.Token,
				"AGENTBOX_GITHOST_PROTOCOL="+rm.scheme, "AGENTBOX_GITHOST_HOST="+rm.host)
		}
	case kindSSH:
		env = append(env, "GIT_SSH_COMMAND="+h.sshCommand(), "GIT_SSH_VARIANT=ssh")
	}
	return conf, env
}

// tokenFor reports whether the token may be sent to rm: over https, or
// http to a loopback host (where it crosses no network), and to a host
// TokenHosts allows.
func (h *Host) tokenFor(rm remote) bool {
	if rm.scheme != "https" && !(rm.scheme == "http" && isLoopback(rm.hostname)) {
		return false
	}
	if len(h.cfg.TokenHosts) == 0 {
		return true
	}
	host := strings.ToLower(rm.host)
	return slices.ContainsFunc(h.cfg.TokenHosts, func(t string) bool { return strings.ToLower(t) == host })
}

// sshCommand is the ssh that git runs for SSH remotes: never asking
// anything (BatchMode), with the key file alone when one is configured,
// else the host's agent and ssh config; host keys checked against the
// configured known_hosts, or recorded on first use in KnownHostsFile.
func (h *Host) sshCommand() string {
	args := []string{"ssh", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=30"}
	if h.cfg.SSHKey != "" {
		args = append(args, "-i", h.cfg.SSHKey, "-o", "IdentitiesOnly=yes")
	}
	switch {
	case h.cfg.SSHKnownHosts != "":
		args = append(args, "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile="+h.cfg.SSHKnownHosts)
	case h.cfg.KnownHostsFile != "":
		_ = os.MkdirAll(filepath.Dir(h.cfg.KnownHostsFile), 0o700)
		args = append(args, "-o", "StrictHostKeyChecking=accept-new", "-o", "UserKnownHostsFile="+h.cfg.KnownHostsFile)
	}
	for i, a := range args {
		args[i] = shellQuote(a)
	}
	return strings.Join(args, " ")
}

func isLoopback(name string) bool {
	if strings.EqualFold(name, "localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
