// Package githost owns everything the host does with git, through the
// host's git binary: cloning a job's repository with the host's
// credentials, recording a job's starting workspace as a commit, the diff
// and the patch of what a job changed, and (for the push at a job's end)
// committing a workspace on a branch and pushing it.
//
// The host keeps a git dir of its own per job (a bare repository outside
// the workspace). The workspace, its .git included, is written by the
// sandbox and is hostile, so:
//
//   - Every git run has GIT_DIR set to the host's git dir and reads no
//     system config and, but for network operations, no global config
//     either; hooks, fsmonitor, pagers, askpass and external diff tools
//     are off, and only the https, http, ssh and file protocols are
//     allowed. Attributes the workspace holds can only name drivers and
//     filters, which only the config (ours) defines.
//   - git never walks the workspace: the tree of a workspace is read by
//     Go through an os.Root (links are recorded as links, never
//     followed; FIFOs, sockets and devices are left out; every entry
//     named .git is left out), its files are written as blobs by Go, and
//     git only answers which paths .gitignore ignores (reading
//     .gitignore files, which it never follows when they are links).
//   - Credentials (a token, a key) reach the host's git processes only,
//     through their environment; never a URL, an argument, a file in the
//     workspace or a message: every message is scrubbed of URLs'
//     userinfo and of the token.
//
// A workspace is read only once the sandbox that wrote it is gone: git
// and Go stat a path before they open it, and a live sandbox could swap a
// file for a link in between.
package githost

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/config"
)

// ErrRefused means a URL or a ref was refused before git ran: malformed,
// of a protocol not allowed, or a local path that is not allowed.
var ErrRefused = errors.New("refused")

// Config is what the host's git works with.
type Config struct {
	// Token is sent as the password of HTTP(S) remotes (user TokenUser, or
	// the URL's user name), through an inline credential helper reading
	// the git process's environment. Empty: the host's own credential
	// helper (its global git config) answers, if any.
	Token string
	// TokenUser is the user name sent with Token; AGENTBOX_GIT_TOKEN_USER's
	// default if empty (GitHub takes any name with a token).
	TokenUser string
	// TokenHosts, if set, are the only hosts ("host" or "host:port") the
	// token is sent to; empty sends it to every HTTP(S) remote.
	TokenHosts []string
	// SSHKey is a private key file for SSH remotes (ssh -i, IdentitiesOnly).
	// Empty: the host's ssh agent (SSH_AUTH_SOCK) and ssh config.
	SSHKey string
	// SSHKnownHosts, if set, is the only known_hosts file SSH remotes are
	// checked against (StrictHostKeyChecking=yes). Empty: KnownHostsFile,
	// where a host's key is recorded on first use (accept-new) and checked
	// from then on.
	SSHKnownHosts string
	// KnownHostsFile is where first-used SSH host keys are kept when
	// SSHKnownHosts is empty.
	KnownHostsFile string
	// Author is "Name <email>", the author and committer of the host's
	// commits; AGENTBOX_GIT_AUTHOR's default if empty.
	Author string
	// AllowLocal allows local paths and file:// URLs as remotes.
	AllowLocal bool
	// Forbidden are directories no local remote may be in or under (the
	// data dir: other jobs' workspaces and git dirs), whatever AllowLocal.
	Forbidden []string
	// Timeout bounds each git run, in time and in CPU time;
	// AGENTBOX_GIT_TIMEOUT's default if zero.
	Timeout time.Duration
	// Memory bounds the data (heap) of each git run (RLIMIT_DATA);
	// AGENTBOX_GIT_MEMORY's default if zero.
	Memory int64
	// BigFile is git's core.bigFileThreshold: a file over it is binary
	// to diff ("Binary files a/x and b/x differ") and stored without
	// deltas; AGENTBOX_GIT_BIG_FILE's default if zero. A text diff costs git about 44
	// bytes of memory per line of each side, so a file of newlines just
	// under git's own 512 MiB would take 22 GB.
	BigFile int64
	// Git is the git binary; "git" (from PATH) if empty.
	Git string
}

// Host runs the host's git as Config says.
type Host struct {
	cfg    Config
	name   string // the author's name
	email  string // the author's email
	global []string
}

// New returns a Host. An Author that is not "Name <email>" is an error.
func New(cfg Config) (*Host, error) {
	def := config.Default().Git // AGENTBOX_GIT_AUTHOR, _TOKEN_USER, _TIMEOUT, _MEMORY, _BIG_FILE
	cfg.Author = cmp.Or(cfg.Author, def.Author)
	cfg.TokenUser = cmp.Or(cfg.TokenUser, def.TokenUser)
	cfg.Timeout = cmp.Or(max(cfg.Timeout, 0), def.Timeout)
	cfg.Git = cmp.Or(cfg.Git, "git")
	cfg.Memory = cmp.Or(max(cfg.Memory, 0), def.Memory)
	cfg.BigFile = cmp.Or(max(cfg.BigFile, 0), def.BigFile)
	name, email, err := ParseAuthor(cfg.Author)
	if err != nil {
		return nil, err
	}
	return &Host{cfg: cfg, name: name, email: email, global: hostEnv()}, nil
}

// ParseAuthor splits "Name <email>" into its parts.
func ParseAuthor(s string) (name, email string, err error) {
	name, rest, ok := strings.Cut(s, "<")
	email, tail, ok2 := strings.Cut(rest, ">")
	name, email = strings.TrimSpace(name), strings.TrimSpace(email)
	if !ok || !ok2 || strings.TrimSpace(tail) != "" || name == "" || email == "" || strings.ContainsAny(s, "\n\x00") {
		return "", "", fmt.Errorf("git author %q: want \"Name <email>\"", s)
	}
	return name, email, nil
}

// hostEnv is the environment the host's git processes start from: this
// process's, without any GIT_ variable (a GIT_DIR or GIT_INDEX_FILE
// inherited from whatever started agentbox must not redirect them).
// HOME, PATH and SSH_AUTH_SOCK pass through: the host's credential
// helper, ssh and its agent need them.
func hostEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return env
}

// safeConfig is the config every git run gets, over anything a config
// file says: nothing git could run on its own, no pager, no automatic
// gc, no protocol but https, http, ssh and file.
var safeConfig = [][2]string{
	{"core.hooksPath", "/dev/null"},
	{"core.fsmonitor", "false"},
	{"core.pager", "cat"},
	{"core.askPass", ""},
	{"core.attributesFile", "/dev/null"},
	{"core.excludesFile", "/dev/null"},
	{"core.protectNTFS", "false"},
	{"core.protectHFS", "false"},
	{"core.untrackedCache", "false"},
	{"gc.auto", "0"},
	{"maintenance.auto", "false"},
	{"protocol.allow", "never"},
	{"protocol.https.allow", "always"},
	{"protocol.http.allow", "always"},
	{"protocol.ssh.allow", "always"},
	{"protocol.file.allow", "always"},
	{"submodule.recurse", "false"},
	{"advice.detachedHead", "false"},
	{"init.defaultBranch", "main"},
}

// run is one git invocation.
type run struct {
	args    []string
	gitDir  string    // GIT_DIR; "" for none (clone, init)
	index   string    // GIT_INDEX_FILE; "" for the git dir's own
	dir     string    // working directory; "" for the git dir or /
	stdin   io.Reader // nil for none
	stdout  io.Writer // nil: collected and returned
	remote  *remote   // credentials and the host's global config for it
	env     []string  // more variables
	noTrace bool      // do not name the arguments in errors
}

// git runs git as r says, with the hardened environment and the host's
// timeout and bounds, and returns what it printed (unless r.stdout took
// it). Its error holds git's stderr (the last few KiB), scrubbed of
// credentials; ErrBound if a bound stopped it.
func (h *Host) git(ctx context.Context, r run) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	cmd := h.command(ctx, r.args...)
	cmd.Env = h.env(r)
	cmd.Dir = r.dir
	if cmd.Dir == "" {
		cmd.Dir = cmp.Or(r.gitDir, "/")
	}
	cmd.Stdin = r.stdin
	var out bytes.Buffer
	cmd.Stdout = &out
	if r.stdout != nil {
		cmd.Stdout = r.stdout
	}
	errw := &tailBuffer{max: 4 << 10}
	cmd.Stderr = errw
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := h.start(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return out.Bytes(), h.runError(ctx, r, cmd.ProcessState, err, errw.String())
	}
	return out.Bytes(), nil
}

// runError says why git failed, in git's words, scrubbed.
func (h *Host) runError(ctx context.Context, r run, ps *os.ProcessState, err error, stderr string) error {
	what := "git"
	if len(r.args) > 0 && !r.noTrace {
		what = "git " + r.args[0]
	}
	msg := strings.TrimSpace(stderr)
	var cause error
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		msg = fmt.Sprintf("timed out after %s. %s", h.cfg.Timeout, msg)
	} else if why := h.overBound(ps, stderr); ctx.Err() == nil && why != "" {
		msg, cause = fmt.Sprintf("stopped at its bound: %s. %s", why, msg), ErrBound
	}
	if msg == "" {
		msg = err.Error()
	}
	return &Error{Op: what, Msg: h.scrub(msg), Err: cause}
}

// Error is a git run that failed, with what git said (scrubbed).
type Error struct {
	Op  string
	Msg string
	// Err is ErrBound when a bound stopped the run; nil otherwise.
	Err error
}

func (e *Error) Error() string { return e.Op + ": " + e.Msg }

// Unwrap is Err.
func (e *Error) Unwrap() error { return e.Err }

// env is the environment of one run.
func (h *Host) env(r run) []string {
	env := append([]string{}, h.global...)
	env = append(env,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=",
		"GIT_PAGER=cat", "PAGER=cat", "GIT_ALLOW_PROTOCOL=https:http:ssh:file", "GIT_NO_REPLACE_OBJECTS=1",
		"GIT_OPTIONAL_LOCKS=0", "LC_ALL=C", "LANGUAGE=",
		"GIT_AUTHOR_NAME="+h.name, "GIT_AUTHOR_EMAIL="+h.email,
		"GIT_COMMITTER_NAME="+h.name, "GIT_COMMITTER_EMAIL="+h.email)
	if r.remote == nil {
		env = append(env, "GIT_CONFIG_GLOBAL=/dev/null")
	}
	if r.gitDir != "" {
		env = append(env, "GIT_DIR="+r.gitDir)
	}
	if r.index != "" {
		env = append(env, "GIT_INDEX_FILE="+r.index)
	}
	conf := append([][2]string{}, safeConfig...)
	conf = append(conf, [2]string{"core.bigFileThreshold", strconv.FormatInt(h.cfg.BigFile, 10)})
	if r.remote != nil {
		conf, env = h.credentials(*r.remote, conf, env)
	}
	env = append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(conf)))
	for i, kv := range conf {
		n := strconv.Itoa(i)
		env = append(env, "GIT_CONFIG_KEY_"+n+"="+kv[0], "GIT_CONFIG_VALUE_"+n+"="+kv[1])
	}
	return append(env, r.env...)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

// line is git's one-line answer, trimmed.
func line(b []byte) string { return strings.TrimSpace(string(b)) }

// InitBare makes gitDir a bare repository of the host's if it is not one
// yet: no hooks, no sample files.
func (h *Host) InitBare(ctx context.Context, gitDir string) error {
	if fi, err := os.Stat(filepath.Join(gitDir, "HEAD")); err == nil && fi.Mode().IsRegular() {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(gitDir), 0o700); err != nil {
		return fmt.Errorf("git dir: %w", err)
	}
	_, err := h.git(ctx, run{args: []string{"init", "--quiet", "--bare", "--template=", "--", gitDir}})
	return err
}
