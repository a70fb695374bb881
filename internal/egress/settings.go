package egress

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"go.yaml.in/yaml/v4"

	"github.com/agentbox/agentbox/internal/units"
)

// Settings are the operator's egress settings as the environment states
// them (config.Egress holds them as plain text): files, lists and the
// default policy. Load reads and checks them.
type Settings struct {
	Presets      string // AGENTBOX_EGRESS_PRESETS: a JSON or YAML file
	Secrets      string // AGENTBOX_EGRESS_SECRETS: a JSON file
	Modes        string // AGENTBOX_EGRESS_MODES: modes, commas between
	Default      string // AGENTBOX_EGRESS_DEFAULT: inline JSON or @path
	AllowPrivate string // AGENTBOX_EGRESS_ALLOW_PRIVATE: CIDRs or addresses
	Resolve      string // AGENTBOX_EGRESS_RESOLVE: name=address, commas between
	CA           string // AGENTBOX_EGRESS_CA: a PEM file
}

// Loaded is Settings read and checked: what the proxies and the job
// service are given.
type Loaded struct {
	// Policy holds the presets, the secrets, the modes jobs may ask for
	// and the policy of a job that states none. Never nil.
	Policy *Config
	// AllowPrivate are the private, loopback or link-local ranges the proxy
	// connects to after all: a private package mirror's.
	AllowPrivate []netip.Prefix
	// Resolve pins names to addresses, like curl's --resolve: the proxy
	// uses these instead of DNS.
	Resolve map[string][]netip.Addr
	// Roots are the certificate authorities the proxy trusts when it
	// verifies the upstream certificate of a host it terminates: the
	// system's plus the CA file's. Nil: the system's alone.
	Roots *x509.CertPool
	// RootsPEM are the CA file's certificates alone, as PEM: every
	// sandbox's trust bundle holds them too, so that its tools trust a
	// private mirror the proxy tunnels to.
	RootsPEM []byte
}

// maxSettingsFile bounds a presets, secrets, default policy or CA file.
const maxSettingsFile = 4 << 20

// Load reads and checks s, each error naming its variable. The default
// policy is read last and checked against the presets, secrets and modes.
func Load(s Settings) (Loaded, error) {
	pc := &Config{Modes: slices.Clone(Modes)}
	l := Loaded{Policy: pc}
	var errs []error
	wrap := func(key string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
	}
	var err error
	if v := strings.TrimSpace(s.Presets); v != "" {
		pc.Presets, err = ReadPresets(v)
		wrap("AGENTBOX_EGRESS_PRESETS", err)
	}
	if v := strings.TrimSpace(s.Secrets); v != "" {
		pc.Secrets, err = ReadSecrets(v)
		wrap("AGENTBOX_EGRESS_SECRETS", err)
	}
	if v := strings.TrimSpace(s.Modes); v != "" {
		pc.Modes, err = parseModes(v)
		wrap("AGENTBOX_EGRESS_MODES", err)
	}
	if v := strings.TrimSpace(s.AllowPrivate); v != "" {
		l.AllowPrivate, err = ParsePrefixes(v)
		wrap("AGENTBOX_EGRESS_ALLOW_PRIVATE", err)
	}
	if v := strings.TrimSpace(s.Resolve); v != "" {
		l.Resolve, err = ParseResolve(v)
		wrap("AGENTBOX_EGRESS_RESOLVE", err)
	}
	if v := strings.TrimSpace(s.CA); v != "" {
		l.Roots, l.RootsPEM, err = readRoots(v)
		wrap("AGENTBOX_EGRESS_CA", err)
	}
	if v := strings.TrimSpace(s.Default); v != "" && len(errs) == 0 {
		wrap("AGENTBOX_EGRESS_DEFAULT", readDefault(v, pc))
	}
	return l, errors.Join(errs...)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ReadPresets reads a presets file, JSON or YAML: a map from a preset's
// name to its allow entries, each in Rule's string or object form.
func ReadPresets(path string) (map[string][]Rule, error) {
	b, err := readJSONOrYAML(path)
	if err != nil {
		return nil, err
	}
	var raw map[string][]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%s: want {\"name\": [\"host\", ...], ...}: %w", path, err)
	}
	out := make(map[string][]Rule, len(raw))
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		if !nameRE.MatchString(name) {
			errs = append(errs, fmt.Errorf("%s: preset name %q: letters, digits, '.', '_' and '-', at most 64", path, name))
			continue
		}
		if len(raw[name]) > MaxEntries {
			errs = append(errs, fmt.Errorf("%s: preset %q: %d entries, at most %d", path, name, len(raw[name]), MaxEntries))
			continue
		}
		rules := make([]Rule, 0, len(raw[name]))
		for i, m := range raw[name] {
			var r Rule
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
// an Secret. Each is checked (its hosts are allow entries, its
// header is "Name: ...{value}...", it names exactly one of env and file);
// the values themselves are not read here, but when a job first uses them.
func ReadSecrets(path string) (map[string]Secret, error) {
	b, err := readLimited(path)
	if err != nil {
		return nil, err
	}
	var m map[string]Secret
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: want {\"name\": {\"hosts\": [...], \"header\": \"Name: ...{value}\", \"env\": \"VAR\"}}: %w", path, err)
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if err := checkSecret(name, m[name]); err != nil {
			errs = append(errs, fmt.Errorf("%s: secret %q: %w", path, name, err))
		}
	}
	return m, errors.Join(errs...)
}

func checkSecret(name string, s Secret) error {
	if !nameRE.MatchString(name) {
		return errors.New("a name is letters, digits, '.', '_' and '-', at most 64")
	}
	if len(s.Hosts) == 0 || len(s.Hosts) > MaxEntries {
		return fmt.Errorf("hosts: want 1 to %d", MaxEntries)
	}
	for i, h := range s.Hosts {
		if _, err := ParseRule(h); err != nil {
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
		if !slices.Contains(Modes, m) {
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
		r, err := ParseRule(strings.TrimSpace(name))
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
func readDefault(v string, c *Config) error {
	b := []byte(v)
	if path, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		if b, err = readLimited(path); err != nil {
			return err
		}
	}
	var p Policy
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

// readLimited reads a regular file of at most maxSettingsFile bytes. It is
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
	b, err := io.ReadAll(io.LimitReader(f, maxSettingsFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxSettingsFile {
		return nil, fmt.Errorf("%s: over %s", path, units.FormatSize(maxSettingsFile))
	}
	return b, nil
}
