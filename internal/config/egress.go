package config

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/units"
)

// Egress configures the egress proxy, a sandbox's only way out (issue 26):
// what jobs' policies are checked against, and the proxy's own bounds.
type Egress struct {
	// Policy holds the operator's presets (AGENTBOX_EGRESS_PRESETS), secrets
	// (AGENTBOX_EGRESS_SECRETS), the modes jobs may ask for
	// (AGENTBOX_EGRESS_MODES) and the policy of a job that states none
	// (AGENTBOX_EGRESS_DEFAULT), already checked. Never nil after Default.
	Policy *egress.Config
	// AllowPrivate are the private, loopback or link-local ranges the proxy
	// connects to after all (AGENTBOX_EGRESS_ALLOW_PRIVATE): a private
	// package mirror's.
	AllowPrivate []netip.Prefix
	// Resolve pins names to addresses, like curl's --resolve
	// (AGENTBOX_EGRESS_RESOLVE): the proxy uses these instead of DNS.
	Resolve map[string][]netip.Addr
	// Roots are the certificate authorities the proxy trusts when it
	// verifies the upstream certificate of a host it terminates: the
	// system's plus AGENTBOX_EGRESS_CA's. Nil: the system's alone.
	Roots *x509.CertPool
	// RootsPEM are AGENTBOX_EGRESS_CA's certificates alone, as PEM: every
	// sandbox's trust bundle holds them too, so that its tools trust a
	// private mirror the proxy tunnels to.
	RootsPEM []byte
	// Bytes is a job's bound on the bytes its sandbox moves through the
	// proxy, in and out together, when it sets no limits.egress
	// (AGENTBOX_EGRESS_BYTES, default 10 GiB).
	Bytes int64
	// Conns bounds a job's concurrent connections (AGENTBOX_EGRESS_CONNS,
	// default 64).
	Conns int
	// Idle is how long a connection may carry nothing before the proxy
	// closes it (AGENTBOX_EGRESS_IDLE, default 2m).
	Idle time.Duration
}

func defaultEgress() Egress {
	return Egress{Policy: &egress.Config{Modes: slices.Clone(egress.Modes)}, Bytes: 10 << 30, Conns: 64, Idle: 2 * time.Minute}
}

// maxEgressFile bounds a presets, secrets, default policy or CA file.
const maxEgressFile = 4 << 20

// egressEnv reads the AGENTBOX_EGRESS_ variables into e. The default
// policy is read last and checked against the presets, secrets and modes.
func egressEnv(lookup func(string) (string, bool), e *Egress) []error {
	env := func(key string) string {
		v, _ := lookup(key)
		return strings.TrimSpace(v)
	}
	errs := []error{
		sizeEnv(lookup, "AGENTBOX_EGRESS_BYTES", &e.Bytes),
		intEnv(lookup, "AGENTBOX_EGRESS_CONNS", &e.Conns),
		durEnv(lookup, "AGENTBOX_EGRESS_IDLE", &e.Idle),
	}
	pc := &egress.Config{Modes: slices.Clone(egress.Modes)}
	e.Policy = pc
	var err error
	if v := env("AGENTBOX_EGRESS_PRESETS"); v != "" {
		pc.Presets, err = ReadPresets(v)
		errs = append(errs, wrapEnv("AGENTBOX_EGRESS_PRESETS", err))
	}
	if v := env("AGENTBOX_EGRESS_SECRETS"); v != "" {
		pc.Secrets, err = ReadSecrets(v)
		errs = append(errs, wrapEnv("AGENTBOX_EGRESS_SECRETS", err))
	}
	if v := env("AGENTBOX_EGRESS_MODES"); v != "" {
		pc.Modes, err = parseModes(v)
		errs = append(errs, wrapEnv("AGENTBOX_EGRESS_MODES", err))
	}
	if v := env("AGENTBOX_EGRESS_ALLOW_PRIVATE"); v != "" {
		e.AllowPrivate, err = ParsePrefixes(v)
		errs = append(errs, wrapEnv("AGENTBOX_EGRESS_ALLOW_PRIVATE", err))
	}
	if v := env("AGENTBOX_EGRESS_RESOLVE"); v != "" {
		e.Resolve, err = ParseResolve(v)
		errs = append(errs, wrapEnv("AGENTBOX_EGRESS_RESOLVE", err))
	}
	if v := env("AGENTBOX_EGRESS_CA"); v != "" {
		e.Roots, e.RootsPEM, err = readRoots(v)
		errs = append(errs, wrapEnv("AGENTBOX_EGRESS_CA", err))
	}
	if v := env("AGENTBOX_EGRESS_DEFAULT"); v != "" && errors.Join(errs...) == nil {
		errs = append(errs, wrapEnv("AGENTBOX_EGRESS_DEFAULT", readDefault(v, pc)))
	}
	return errs
}

// Validate checks the egress bounds.
func (e Egress) Validate() error {
	var errs []error
	if e.Bytes < 1<<20 {
		errs = append(errs, fmt.Errorf("egress bytes %s: at least 1MiB (AGENTBOX_EGRESS_BYTES)", units.FormatSize(e.Bytes)))
	}
	if e.Conns < 1 || e.Conns > 4096 {
		errs = append(errs, fmt.Errorf("egress connections %d: want 1 to 4096 (AGENTBOX_EGRESS_CONNS)", e.Conns))
	}
	if e.Idle < time.Second {
		errs = append(errs, fmt.Errorf("egress idle %v: at least 1s (AGENTBOX_EGRESS_IDLE)", e.Idle))
	}
	if e.Policy == nil {
		errs = append(errs, errors.New("egress policy settings: missing"))
	}
	return errors.Join(errs...)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ReadPresets reads a presets file, JSON or YAML: a map from a preset's
// name to its allow entries, each in egress.Rule's string or object form.
func ReadPresets(path string) (map[string][]egress.Rule, error) {
	b, err := readJSONOrYAML(path)
	if err != nil {
		return nil, err
	}
	var raw map[string][]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%s: want {\"name\": [\"host\", ...], ...}: %w", path, err)
	}
	out := make(map[string][]egress.Rule, len(raw))
	var errs []error
	for _, name := range sortedKeys(raw) {
		if !nameRE.MatchString(name) {
			errs = append(errs, fmt.Errorf("%s: preset name %q: letters, digits, '.', '_' and '-', at most 64", path, name))
			continue
		}
		if len(raw[name]) > egress.MaxEntries {
			errs = append(errs, fmt.Errorf("%s: preset %q: %d entries, at most %d", path, name, len(raw[name]), egress.MaxEntries))
			continue
		}
		rules := make([]egress.Rule, 0, len(raw[name]))
		for i, m := range raw[name] {
			var r egress.Rule
			if err := json.Unmarshal(m, &r); err != nil {
				errs = append(errs, fmt.Errorf("%s: preset %q entry %d: %w", path, name, i, err))
				continue
			}
			rules = append(rules, r)
		}
		out[name] = rules
	}
	return out, errors.Join(errs...)
}

var (
	headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")
	envNameRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// ReadSecrets reads a secrets file (JSON): a map from a secret's name to
// an egress.Secret. Each is checked (its hosts are allow entries, its
// header is "Name: ...{value}...", it names exactly one of env and file);
// the values themselves are not read here, but when a job first uses them.
func ReadSecrets(path string) (map[string]egress.Secret, error) {
	b, err := readLimited(path)
	if err != nil {
		return nil, err
	}
	var m map[string]egress.Secret
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: want {\"name\": {\"hosts\": [...], \"header\": \"Name: ...{value}\", \"env\": \"VAR\"}}: %w", path, err)
	}
	var errs []error
	for _, name := range sortedKeys(m) {
		if err := checkSecret(name, m[name]); err != nil {
			errs = append(errs, fmt.Errorf("%s: secret %q: %w", path, name, err))
		}
	}
	return m, errors.Join(errs...)
}

func checkSecret(name string, s egress.Secret) error {
	if !nameRE.MatchString(name) {
		return errors.New("a name is letters, digits, '.', '_' and '-', at most 64")
	}
	if len(s.Hosts) == 0 || len(s.Hosts) > egress.MaxEntries {
		return fmt.Errorf("hosts: want 1 to %d", egress.MaxEntries)
	}
	for i, h := range s.Hosts {
		if _, err := egress.ParseRule(h); err != nil {
			return fmt.Errorf("hosts[%d]: %w", i, err)
		}
	}
	hname, value, ok := strings.Cut(s.Header, ": ")
	if !ok || !headerNameRE.MatchString(hname) || !strings.Contains(value, "{value}") ||
		strings.ContainsAny(s.Header, "\r\n\x00") || len(s.Header) > 1024 {
		return fmt.Errorf("header %q: want \"Name: text with {value}\" on one line", s.Header)
	}
	if (s.Env == "") == (s.File == "") {
		return errors.New("name exactly one of env (a variable of the server's) and file (a file of the server's)")
	}
	if s.Env != "" && !envNameRE.MatchString(s.Env) {
		return fmt.Errorf("env %q: not a variable name", s.Env)
	}
	if s.File != "" && !filepath.IsAbs(s.File) {
		return fmt.Errorf("file %q: want an absolute path", s.File)
	}
	if s.Placeholder != "" && !envNameRE.MatchString(s.Placeholder) {
		return fmt.Errorf("placeholder %q: not a variable name", s.Placeholder)
	}
	return nil
}

// parseModes reads AGENTBOX_EGRESS_MODES: none, allow and open, commas
// between.
func parseModes(v string) ([]string, error) {
	var out []string
	for _, m := range strings.Split(v, ",") {
		m = strings.TrimSpace(m)
		if m == "" {
			continue
		}
		if !slices.Contains(egress.Modes, m) {
			return nil, fmt.Errorf("%q is not a mode: want none, allow or open", m)
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("name at least one mode")
	}
	return out, nil
}

// ParsePrefixes reads CIDRs or single addresses, commas between.
func ParsePrefixes(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%q: want a CIDR such as 10.1.0.0/16 or an address", s)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// ParseResolve reads "name=address,name=address": a name repeated gets
// every address given.
func ParseResolve(v string) (map[string][]netip.Addr, error) {
	out := map[string][]netip.Addr{}
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, addr, ok := strings.Cut(item, "=")
		r, err := egress.ParseRule(strings.TrimSpace(name))
		if !ok || err != nil || r.IsIP() || r.Port != 0 || strings.HasPrefix(r.Host, "*") {
			return nil, fmt.Errorf("%q: want name=address, like mirror.internal=10.0.0.5", item)
		}
		a, err := netip.ParseAddr(strings.TrimSpace(addr))
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%q: %q is not an IP address", item, addr)
		}
		if !slices.Contains(out[r.Host], a) {
			out[r.Host] = append(out[r.Host], a)
		}
	}
	return out, nil
}

// readRoots is the system's roots plus the PEM certificates in path, and
// those certificates alone, re-encoded (nothing else of the file's).
func readRoots(path string) (*x509.CertPool, []byte, error) {
	b, err := readLimited(path)
	if err != nil {
		return nil, nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	var certs []byte
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if c, err := x509.ParseCertificate(blk.Bytes); blk.Type == "CERTIFICATE" && err == nil {
			pool.AddCert(c)
			certs = append(certs, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: blk.Bytes})...)
		}
	}
	if len(certs) == 0 {
		return nil, nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return pool, certs, nil
}

// readDefault reads AGENTBOX_EGRESS_DEFAULT (inline JSON or @path), checks
// it against c and keeps it as c.Default.
func readDefault(v string, c *egress.Config) error {
	b := []byte(v)
	if path, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		if b, err = readLimited(path); err != nil {
			return err
		}
	}
	var p egress.Policy
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("want a policy such as {\"mode\":\"none\"} or @path: %w", err)
	}
	p, err := c.Check(p)
	if err != nil {
		return err
	}
	c.Default = p
	return nil
}

// readJSONOrYAML reads path, YAML (JSON is YAML too) re-encoded as JSON.
func readJSONOrYAML(path string) ([]byte, error) {
	b, err := readLimited(path)
	if err != nil {
		return nil, err
	}
	if json.Valid(b) {
		return b, nil
	}
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: neither JSON nor YAML: %w", path, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// readLimited reads a regular file of at most maxEgressFile bytes. It is
// opened without blocking, so a FIFO (which would wait for a writer) is
// refused at once, as is a device such as /dev/zero.
func readLimited(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxEgressFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxEgressFile {
		return nil, fmt.Errorf("%s: over %s", path, units.FormatSize(maxEgressFile))
	}
	return b, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
