package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/units"
)

// Git configures how the host reaches job repositories: it clones and
// pushes them itself, with these credentials, which never enter a sandbox.
type Git struct {
	// Token is the password of HTTPS remotes (AGENTBOX_GIT_TOKEN), with
	// the user name TokenUser (AGENTBOX_GIT_TOKEN_USER, default
	// x-access-token) or the URL's. Empty: the host's credential helper.
	Token     string
	TokenUser string
	// TokenHosts limits the hosts the token is sent to
	// (AGENTBOX_GIT_TOKEN_HOSTS, comma-separated host[:port]); empty
	// sends it to every HTTPS remote a job names.
	TokenHosts []string
	// SSHKey is a private key file for SSH remotes (AGENTBOX_GIT_SSH_KEY);
	// empty: the host's ssh agent and config.
	SSHKey string
	// SSHKnownHosts is the known_hosts file SSH remotes are checked
	// against (AGENTBOX_GIT_SSH_KNOWN_HOSTS); empty: <data dir>/ssh_known_hosts,
	// where a host's key is recorded on first use.
	SSHKnownHosts string
	// Author is "Name <email>", the author of the host's commits
	// (AGENTBOX_GIT_AUTHOR).
	Author string
	// AllowLocal allows local paths and file:// as job repositories
	// (AGENTBOX_GIT_ALLOW_LOCAL, default true); paths in the data dir
	// never are.
	AllowLocal bool
	// Timeout bounds each git run of the host (AGENTBOX_GIT_TIMEOUT), and
	// each step of a job's hand-back: its commit, its push, its pull request.
	Timeout time.Duration
	// Memory bounds the memory (RLIMIT_DATA) of each git run of the host
	// (AGENTBOX_GIT_MEMORY, default 1GiB).
	Memory int64
	// BigFile is the size over which a file is named as binary in a diff
	// rather than diffed line by line (AGENTBOX_GIT_BIG_FILE, git's
	// core.bigFileThreshold, default 1MiB).
	BigFile int64
	// Diffs is how many diffs the server makes at once
	// (AGENTBOX_GIT_DIFFS, default 2); more wait their turn.
	Diffs int
	// MaxDiff is the most bytes a diff (or patch) of a job may take
	// (AGENTBOX_GIT_MAX_DIFF, default 256MiB); a larger one is refused.
	MaxDiff int64
	// Hosts are the services pull requests are opened on, as
	// AGENTBOX_GIT_HOSTS states them (KIND=HOST[=APIBASE], commas
	// between); forge.ParseHosts reads them where they are used, and
	// github.com is always one.
	Hosts string
}

// Validate checks the git settings.
func (g Git) Validate() error {
	var errs []error
	if strings.IndexFunc(g.Token+g.TokenUser, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		errs = append(errs, errors.New("git token and token user: no spaces or control characters (AGENTBOX_GIT_TOKEN, AGENTBOX_GIT_TOKEN_USER)"))
	}
	if g.Timeout < time.Second {
		errs = append(errs, fmt.Errorf("git timeout %v: at least 1s (AGENTBOX_GIT_TIMEOUT)", g.Timeout))
	}
	if g.Memory < 64<<20 {
		errs = append(errs, fmt.Errorf("git memory %s: at least 64MiB (AGENTBOX_GIT_MEMORY)", units.FormatSize(g.Memory)))
	}
	if g.BigFile < 4<<10 || g.BigFile > 512<<20 {
		errs = append(errs, fmt.Errorf("git big file %s: want 4KiB to 512MiB (AGENTBOX_GIT_BIG_FILE)", units.FormatSize(g.BigFile)))
	}
	if g.MaxDiff < 1<<20 {
		errs = append(errs, fmt.Errorf("git max diff %s: at least 1MiB (AGENTBOX_GIT_MAX_DIFF)", units.FormatSize(g.MaxDiff)))
	}
	if g.Diffs < 1 {
		errs = append(errs, fmt.Errorf("git diffs %d: at least 1 (AGENTBOX_GIT_DIFFS)", g.Diffs))
	}
	return errors.Join(errs...)
}
