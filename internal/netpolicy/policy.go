// Package netpolicy is a job's network (egress) policy: what a job asks for
// (Policy) and its entries (Rule), the operator's settings it is checked
// against (Config), and the decision for one connection
// (Effective.Decide). It is the body of "network" in the API, so it is a
// leaf: it imports no other agentbox package, and the API's wire types and
// client use it without the proxy (package egress, which applies it).
package netpolicy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The modes of a policy.
const (
	// ModeNone reaches nothing: the default.
	ModeNone = "none"
	// ModeAllow reaches the hosts the allow list, presets and secrets name.
	ModeAllow = "allow"
	// ModeOpen reaches any public host but those denied.
	ModeOpen = "open"
)

// Modes are every mode, in the order the docs list them.
var Modes = []string{ModeNone, ModeAllow, ModeOpen}

// MaxEntries bounds a policy's allow and deny entries, presets and secrets
// together.
const MaxEntries = 256

// Policy is a job's egress policy as the job (or the operator's default)
// states it: the body of "network" in POST /v1/jobs and of PATCH
// /v1/jobs/{id}/network. Presets and secrets are names of the operator's;
// Config.Effective expands them.
type Policy struct {
	// Mode is none, allow or open; empty means allow when the policy names
	// any entry, preset or secret, and none otherwise.
	Mode    string   `json:"mode,omitempty"`
	Allow   []Rule   `json:"allow,omitempty"`
	Deny    []Rule   `json:"deny,omitempty"`
	Presets []string `json:"presets,omitempty"`
	Secrets []string `json:"secrets,omitempty"`
}

// IsZero says the policy states nothing (the operator's default applies).
func (p Policy) IsZero() bool {
	return p.Mode == "" && len(p.Allow) == 0 && len(p.Deny) == 0 && len(p.Presets) == 0 && len(p.Secrets) == 0
}

// Rule is one allow or deny entry: a host name, a "*." wildcard (every
// name beneath, not the name itself), an IP literal or a CIDR, with an
// optional port (0: 80 and 443) and, on an allow entry, the HTTP methods it
// permits (empty: any). Its JSON is the string "host[:port]", or an object
// {"host": "host[:port]", "methods": [...]} when it has methods.
type Rule struct {
	// Host is lower case without a trailing dot: a name, "*.suffix", or
	// the canonical form of an IP literal or CIDR.
	Host    string
	Port    int
	Methods []string
	// prefix is set for an IP literal (a /32 or /128) or CIDR.
	prefix netip.Prefix
}

var (
	labelRE  = regexp.MustCompile(`^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$`)
	methodRE = regexp.MustCompile(`^[A-Z]{1,16}$`)
)

// ParseRule reads "host", "host:port", "*.suffix[:port]", an IP literal
// ("[v6]:port" with a port), or a CIDR ("10.0.0.0/8:5432",
// "[fd00::/8]:443").
func ParseRule(s string) (Rule, error) {
	if s == "" || len(s) > 300 {
		return Rule{}, errors.New("an entry is a host name, *.domain, IP or CIDR with an optional :port")
	}
	host, port := s, 0
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return Rule{}, fmt.Errorf("%q: unclosed [", s)
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return Rule{}, fmt.Errorf("%q: want [address]:port", s)
			}
			p, err := parsePort(rest[1:])
			if err != nil {
				return Rule{}, fmt.Errorf("%q: %w", s, err)
			}
			port = p
		}
	} else if i := strings.LastIndex(s, ":"); i >= 0 && strings.Count(s, ":") == 1 {
		p, err := parsePort(s[i+1:])
		if err != nil {
			return Rule{}, fmt.Errorf("%q: %w", s, err)
		}
		host, port = s[:i], p
	}
	r := Rule{Port: port}
	if pfx, err := netip.ParsePrefix(host); err == nil {
		r.prefix = pfx.Masked()
		r.Host = r.prefix.String()
		return r, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return Rule{}, fmt.Errorf("%q: an address with a zone", s)
		}
		r.prefix = netip.PrefixFrom(a, a.BitLen())
		r.Host = a.String()
		return r, nil
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	check := strings.TrimPrefix(name, "*.")
	if strings.Contains(check, "*") || len(check) > 253 || check == "" {
		return Rule{}, fmt.Errorf("%q: not a host name, *.domain, IP or CIDR", s)
	}
	for _, l := range strings.Split(check, ".") {
		if !labelRE.MatchString(l) {
			return Rule{}, fmt.Errorf("%q: not a host name, *.domain, IP or CIDR", s)
		}
	}
	r.Host = name
	return r, nil
}

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("port %q is not 1-65535", s)
	}
	return p, nil
}

// String is the entry as ParseRule reads it (without its methods).
func (r Rule) String() string {
	h := r.Host
	if r.prefix.IsValid() && r.prefix.Addr().Is6() && r.Port != 0 {
		h = "[" + h + "]"
	}
	if r.Port != 0 {
		return h + ":" + strconv.Itoa(r.Port)
	}
	return h
}

// IsIP says the entry is an IP literal or CIDR, matched against the
// address a connection goes to, not its name.
func (r Rule) IsIP() bool { return r.prefix.IsValid() }

type ruleObject struct {
	Host    string   `json:"host"`
	Methods []string `json:"methods,omitempty"`
}

// MarshalJSON writes the string form, or the object when r has methods.
func (r Rule) MarshalJSON() ([]byte, error) {
	if len(r.Methods) == 0 {
		return json.Marshal(r.String())
	}
	return json.Marshal(ruleObject{Host: r.String(), Methods: r.Methods})
}

// UnmarshalJSON reads either form; methods are upper-cased.
func (r *Rule) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := ParseRule(s)
		if err != nil {
			return err
		}
		*r = v
		return nil
	}
	var o ruleObject
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return errors.New(`an entry is "host[:port]" or {"host": "host[:port]", "methods": ["GET", ...]}`)
	}
	v, err := ParseRule(o.Host)
	if err != nil {
		return err
	}
	if len(o.Methods) > 16 {
		return fmt.Errorf("%q: at most 16 methods", o.Host)
	}
	for _, m := range o.Methods {
		m = strings.ToUpper(m)
		if !methodRE.MatchString(m) {
			return fmt.Errorf("%q: method %q is not an HTTP method", o.Host, m)
		}
		if !slices.Contains(v.Methods, m) {
			v.Methods = append(v.Methods, m)
		}
	}
	*r = v
	return nil
}

// MatchesPort says whether r covers port (80 and 443 when r names none).
func (r Rule) MatchesPort(port int) bool {
	if r.Port == 0 {
		return port == 80 || port == 443
	}
	return r.Port == port
}

// Matches says whether r covers a connection to host (a lower-case name,
// or an IP literal) at addr (the address it resolved to; invalid when not
// resolved yet) and port. A name entry matches the name; an IP or CIDR
// entry the address, or the host when it is itself a literal.
func (r Rule) Matches(host string, addr netip.Addr, port int) bool {
	if !r.MatchesPort(port) {
		return false
	}
	if r.prefix.IsValid() {
		if a, err := netip.ParseAddr(host); err == nil && r.prefix.Contains(a.Unmap()) {
			return true
		}
		return addr.IsValid() && r.prefix.Contains(addr.Unmap())
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if suffix, ok := strings.CutPrefix(r.Host, "*"); ok {
		return strings.HasSuffix(host, suffix) && len(host) > len(suffix)
	}
	return host == r.Host
}

// AllowsMethod says whether r permits method (any, when r names none).
func (r Rule) AllowsMethod(method string) bool {
	return len(r.Methods) == 0 || slices.Contains(r.Methods, strings.ToUpper(method))
}

// Secret is a credential the operator binds to hosts
// (AGENTBOX_EGRESS_SECRETS): the proxy adds Header, with "{value}" replaced
// by the value, to every request to one of Hosts, and the sandbox sees only
// a placeholder in the environment variable named Env (or, when Env is
// empty, the secret's name upper-cased).
type Secret struct {
	Hosts  []string `json:"hosts"`
	Header string   `json:"header"`
	// Env is where the server reads the value (its own environment
	// variable of that name), unless File is set.
	Env string `json:"env,omitempty"`
	// File is a file of the server's holding the value.
	File string `json:"file,omitempty"`
	// Placeholder names the sandbox's environment variable holding the
	// placeholder; empty for Env, or the secret's name upper-cased.
	Placeholder string `json:"placeholder,omitempty"`
}

// Config is what the operator sets: the named presets, the secrets, the
// modes a job may ask for and the policy of a job that states none.
type Config struct {
	Presets map[string][]Rule
	Secrets map[string]Secret
	// Modes a job may ask for; empty allows all.
	Modes []string
	// Default is the policy of a job that states none.
	Default Policy
}

// FieldError is a bad policy: Field is the JSON path within the policy
// ("allow[3]", "presets[0]", "mode"), for the API's 400.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Check returns p as the job will run with it: the operator's default when
// p states nothing, Mode filled in. It refuses, with a *FieldError, an
// unknown mode, preset or secret, a mode the operator forbids, mode none
// with entries, or more than MaxEntries entries.
func (c *Config) Check(p Policy) (Policy, error) {
	if p.IsZero() {
		p = c.Default
	}
	if n := len(p.Allow) + len(p.Deny) + len(p.Presets) + len(p.Secrets); n > MaxEntries {
		return p, &FieldError{"allow", fmt.Errorf("%d entries: at most %d in allow, deny, presets and secrets together", n, MaxEntries)}
	}
	if p.Mode == "" {
		p.Mode = ModeNone
		if len(p.Allow) > 0 || len(p.Presets) > 0 || len(p.Secrets) > 0 {
			p.Mode = ModeAllow
		}
	}
	if !slices.Contains(Modes, p.Mode) {
		return p, &FieldError{"mode", fmt.Errorf("%q is not a mode: use none, allow or open", p.Mode)}
	}
	if len(c.Modes) > 0 && !slices.Contains(c.Modes, p.Mode) {
		return p, &FieldError{"mode", fmt.Errorf("mode %q is not allowed here (AGENTBOX_EGRESS_MODES allows %s)", p.Mode, strings.Join(c.Modes, ", "))}
	}
	if p.Mode == ModeNone && (len(p.Allow) > 0 || len(p.Presets) > 0 || len(p.Secrets) > 0) {
		return p, &FieldError{"mode", errors.New("mode none reaches nothing: drop it, or the allow entries, presets and secrets")}
	}
	for i, name := range p.Presets {
		if _, ok := c.Presets[name]; !ok {
			return p, &FieldError{fmt.Sprintf("presets[%d]", i), fmt.Errorf("unknown preset %q%s", name, known(c.Presets))}
		}
	}
	for i, name := range p.Secrets {
		if _, ok := c.Secrets[name]; !ok {
			return p, &FieldError{fmt.Sprintf("secrets[%d]", i), fmt.Errorf("unknown secret %q%s", name, known(c.Secrets))}
		}
	}
	for i, r := range p.Deny {
		if len(r.Methods) > 0 {
			return p, &FieldError{fmt.Sprintf("deny[%d]", i), errors.New("a deny entry denies every method: drop methods")}
		}
	}
	return p, nil
}

func known[V any](m map[string]V) string {
	if len(m) == 0 {
		return " (the server defines none)"
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return " (known: " + strings.Join(names, ", ") + ")"
}

// Effective is a checked policy with its presets and secrets expanded:
// what the proxy decides by.
type Effective struct {
	Mode  string
	Allow []Rule
	Deny  []Rule
	// Secrets are the job's secrets by name.
	Secrets map[string]Secret
}

// Effective expands p (as Check returned it): each preset's entries join
// the allow list (a job extends a preset, never replaces it) and each
// secret's hosts are allowed on 443.
func (c *Config) Effective(p Policy) Effective {
	e := Effective{Mode: p.Mode, Deny: slices.Clone(p.Deny), Allow: slices.Clone(p.Allow)}
	for _, name := range p.Presets {
		e.Allow = append(e.Allow, c.Presets[name]...)
	}
	for _, name := range p.Secrets {
		s := c.Secrets[name]
		if e.Secrets == nil {
			e.Secrets = map[string]Secret{}
		}
		e.Secrets[name] = s
		for _, h := range s.Hosts {
			if r, err := ParseRule(h); err == nil {
				if r.Port == 0 {
					r.Port = 443
				}
				e.Allow = append(e.Allow, r)
			}
		}
	}
	return e
}

// Decision is what the policy says of one connection.
type Decision struct {
	Allowed bool
	// Rule is the entry that decided, as written; empty when none did.
	Rule string
	// Reason says why, in words the model and the person can act on.
	Reason string
}

// Decide applies e to a connection to host (lower case) at addr (invalid
// before resolving) and port, for method when the proxy sees one (empty
// otherwise): deny entries first, then mode, then the allow entries, whose
// methods are checked when method is known. It does not check the
// addresses refused whatever the policy says (see the proxy).
func (e Effective) Decide(host string, addr netip.Addr, port int, method string) Decision {
	if e.Mode == ModeNone || e.Mode == "" {
		return Decision{Reason: "the job's network mode is none"}
	}
	for _, r := range e.Deny {
		if r.Matches(host, addr, port) {
			return Decision{Rule: r.String(), Reason: "denied by " + r.String()}
		}
	}
	for _, r := range e.Allow {
		if !r.Matches(host, addr, port) {
			continue
		}
		if method != "" && !r.AllowsMethod(method) {
			return Decision{Rule: r.String(), Reason: fmt.Sprintf("%s allows only %s", r.String(), strings.Join(r.Methods, ", "))}
		}
		return Decision{Allowed: true, Rule: r.String(), Reason: "allowed by " + r.String()}
	}
	if e.Mode == ModeOpen {
		return Decision{Allowed: true, Reason: "mode open"}
	}
	return Decision{Reason: fmt.Sprintf("%s is not in the job's allow list", net.JoinHostPort(host, strconv.Itoa(port)))}
}

// Terminated says whether the proxy must terminate TLS to host:port to
// apply e: a secret is bound to it, or the allow entry that admits it
// restricts methods.
func (e Effective) Terminated(host string, addr netip.Addr, port int) (secret string, ok bool) {
	for name, s := range e.Secrets {
		for _, h := range s.Hosts {
			if r, err := ParseRule(h); err == nil && r.Matches(host, addr, port) {
				return name, true
			}
		}
	}
	for _, r := range e.Allow {
		if r.Matches(host, addr, port) {
			return "", len(r.Methods) > 0
		}
	}
	return "", false
}
