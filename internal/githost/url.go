package githost

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
)

// Kinds of remote.
const (
	kindHTTP  = "http"  // http:// or https://
	kindSSH   = "ssh"   // ssh:// or [user@]host:path
	kindLocal = "local" // file:// or an absolute path
)

// remote is a remote URL that passed ParseURL.
type remote struct {
	url  string // as git is given it
	kind string
	host string // host[:port] of an http or ssh remote
	// scheme and hostname (host without port) of an http remote, as git
	// names them to a credential helper (the scheme in lower case).
	scheme, hostname string
	user             string // the URL's user name, if any
	path             string // the local path of a local remote
}

// ParseURL checks that raw is a remote URL git may be given: https://,
// http://, ssh:// or scp-like [user@]host:path, file:// or an absolute
// path; no password in it (credentials come from the host), nothing
// starting with '-', no control characters, no transport::address form
// (ext::, fd::). It does not apply a Host's policy on local paths
// (CheckURL does).
func ParseURL(raw string) error {
	_, err := parseURL(raw)
	return err
}

func parseURL(raw string) (remote, error) {
	refuse := func(why string) (remote, error) {
		return remote{}, fmt.Errorf("%w: repository url %q: %s", ErrRefused, Redact(raw), why)
	}
	switch {
	case raw == "":
		return refuse("empty")
	case len(raw) > 4096:
		return refuse("longer than 4096 bytes")
	case strings.IndexFunc(raw, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return refuse("control characters")
	case raw[0] == '-':
		return refuse("starts with '-'")
	case transportForm.MatchString(raw):
		return refuse("transport::address remotes are not allowed")
	case strings.Contains(raw, "://"):
		return parseSchemeURL(raw, refuse)
	case strings.HasPrefix(raw, "/"):
		return remote{url: raw, kind: kindLocal, path: filepath.Clean(raw)}, nil
	}
	colon, slash := strings.IndexByte(raw, ':'), strings.IndexByte(raw, '/')
	if colon < 0 || slash >= 0 && slash < colon {
		return refuse("a relative path; give an absolute path or a URL")
	}
	user, host, _ := strings.Cut(raw[:colon], "@")
	if host == "" {
		user, host = "", user
	}
	if host == "" || host[0] == '-' || colon == len(raw)-1 {
		return refuse("want [user@]host:path")
	}
	return remote{url: raw, kind: kindSSH, host: host, user: user}, nil
}

// transportForm is git's "<transport>::<address>" remote syntax.
var transportForm = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9+.-]*::`)

func parseSchemeURL(raw string, refuse func(string) (remote, error)) (remote, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return refuse("not a URL")
	}
	if _, ok := u.User.Password(); ok {
		return refuse("has a password; the host's credentials are used (AGENTBOX_GIT_TOKEN, its credential helper or ssh key), never the URL's")
	}
	r := remote{url: raw, host: u.Host, user: u.User.Username(), scheme: strings.ToLower(u.Scheme), hostname: u.Hostname()}
	switch strings.ToLower(u.Scheme) {
	case "https", "http":
		r.kind = kindHTTP
	case "ssh", "git+ssh", "ssh+git":
		r.kind = kindSSH
	case "file":
		if u.Host != "" && u.Host != "localhost" || !strings.HasPrefix(u.Path, "/") {
			return refuse("want file:///absolute/path")
		}
		return remote{url: raw, kind: kindLocal, path: filepath.Clean(u.Path)}, nil
	default:
		return refuse(fmt.Sprintf("scheme %q is not allowed; use https, http, ssh or file", u.Scheme))
	}
	if u.Hostname() == "" || strings.HasPrefix(u.Host, "-") || strings.HasPrefix(u.User.Username(), "-") {
		return refuse("no host, or one starting with '-'")
	}
	if strings.Trim(u.Path, "/") == "" {
		return refuse("no repository path")
	}
	return r, nil
}

// CheckURL is ParseURL and the host's policy: a local remote (path or
// file://) must be allowed (Config.AllowLocal) and lie outside every
// Forbidden directory, also once its links are resolved, and outside /proc.
func (h *Host) CheckURL(raw string) error {
	_, err := h.remote(raw)
	return err
}

func (h *Host) remote(raw string) (remote, error) {
	r, err := parseURL(raw)
	if err != nil || r.kind != kindLocal {
		return r, err
	}
	if !h.cfg.AllowLocal {
		return r, fmt.Errorf("%w: repository %q: local paths and file:// are not allowed on this server (AGENTBOX_GIT_ALLOW_LOCAL)", ErrRefused, raw)
	}
	paths := []string{r.path}
	if p, err := filepath.EvalSymlinks(r.path); err == nil {
		paths = append(paths, p)
	}
	// /proc/PID/root and /proc/PID/cwd lead into the mount namespace of
	// process PID (a sandbox, any container), where the data dir may be
	// mounted under another path; their links resolve in ours, to the
	// wrong path, so no path check can follow them.
	for _, p := range paths {
		if within(p, "/proc") {
			return r, fmt.Errorf("%w: repository %q is under /proc", ErrRefused, raw)
		}
	}
	for _, dir := range h.cfg.Forbidden {
		roots := []string{filepath.Clean(dir)}
		if d, err := filepath.EvalSymlinks(dir); err == nil {
			roots = append(roots, d)
		}
		for _, p := range paths {
			for _, root := range roots {
				if within(p, root) {
					return r, fmt.Errorf("%w: repository %q is inside agentbox's data dir", ErrRefused, raw)
				}
			}
		}
	}
	return r, nil
}

// within reports whether p is dir or under it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// Redact returns raw without the user information of a URL
// (https://user:secret@host/… → https://host/…, user@host:path →
// host:path); what is not a URL comes back as is.
func Redact(raw string) string {
	if i := strings.Index(raw, "://"); i >= 0 {
		rest := raw[i+3:]
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
			return raw[:i+3] + rest[at+1:]
		}
		return raw
	}
	if strings.HasPrefix(raw, "/") {
		return raw
	}
	colon, slash := strings.IndexByte(raw, ':'), strings.IndexByte(raw, '/')
	if colon > 0 && (slash < 0 || colon < slash) {
		if at := strings.LastIndexByte(raw[:colon], '@'); at >= 0 {
			return raw[at+1:]
		}
	}
	return raw
}

// userinfo matches the user information of any URL in a message.
var userinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/\s@'"]*@`)

// scrub removes from a message what must never be shown: URLs' user
// information and the token.
func (h *Host) scrub(msg string) string {
	msg = userinfo.ReplaceAllString(msg, "$1")
	if h.cfg.Token != "" {
		msg = strings.ReplaceAll(msg, h.cfg.Token, "[token]")
	}
	return msg
}

// CheckRef checks that name is a ref name git accepts (the rules of git
// check-ref-format, one level allowed): a branch, a tag, a commit's hash
// or a full ref. It refuses a leading '-' too, so that no ref is taken
// for an option.
func CheckRef(name string) error {
	refuse := func(why string) error { return fmt.Errorf("%w: ref %q: %s", ErrRefused, name, why) }
	switch {
	case name == "":
		return refuse("empty")
	case len(name) > 1024:
		return refuse("longer than 1024 bytes")
	case name[0] == '-':
		return refuse("starts with '-'")
	case name == "@":
		return refuse(`"@" is not a ref name`)
	case strings.HasSuffix(name, "/") || strings.HasSuffix(name, "."):
		return refuse("ends with '/' or '.'")
	case strings.Contains(name, "..") || strings.Contains(name, "@{") || strings.Contains(name, "//"):
		return refuse(`contains "..", "@{" or "//"`)
	case strings.IndexFunc(name, badRefRune) >= 0:
		return refuse(`contains a space, a control character or one of ~^:?*[\`)
	}
	for _, c := range strings.Split(name, "/") {
		if c == "" || c[0] == '.' || strings.HasSuffix(c, ".lock") {
			return refuse("a component is empty, starts with '.' or ends with .lock")
		}
	}
	return nil
}

func badRefRune(r rune) bool {
	return r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r)
}

// CheckBranch checks that name can be a branch: a ref name (CheckRef)
// other than HEAD.
func CheckBranch(name string) error {
	if name == "HEAD" {
		return fmt.Errorf("%w: branch %q: not a branch name", ErrRefused, name)
	}
	return CheckRef(name)
}
