package egress

// secrets.go is the credential broker: a per-job certificate authority the
// sandbox trusts, leaf certificates for the hosts the proxy terminates, the
// placeholders the sandbox holds instead of the secrets, and the values,
// read on the server when a job first needs them. secrets_relay.go is the
// HTTP/1.1 relay inside a terminated connection, secrets_scrub.go what
// keeps the value out of its answers.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"net/textproto"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// brokerCAValidity is how long a job's CA (and every leaf it signs) is
	// valid; the CA is made when the job's broker is.
	brokerCAValidity = 7 * 24 * time.Hour
	// brokerLeafCache bounds the leaf certificates a broker keeps.
	brokerLeafCache = 256
	// brokerMaxValue bounds a secret's value read from a file.
	brokerMaxValue = 64 << 10
	// brokerPlaceholderPrefix starts every placeholder.
	brokerPlaceholderPrefix = "agentbox-placeholder-"
)

// Broker is one job's credential broker: it terminates TLS for the hosts
// the job's secrets are bound to (and those whose allow entry restricts
// methods) with a certificate from the job's own CA, sets the secret's
// header on each request it forwards, and connects upstream verifying the
// real certificate. The sandbox holds only placeholders; the values are
// read on the server, kept in this process's memory, and replaced by the
// placeholder wherever an upstream response echoes them.
//
// The CA's private key is made in memory by NewBroker and never leaves
// it: not written to disk, not returned by any method.
type Broker struct {
	job      string
	roots    *x509.CertPool
	sessions tls.ClientSessionCache // upstream TLS sessions, for resumption

	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte

	mu           sync.Mutex
	secrets      map[string]Secret
	placeholders map[string]string // secret name -> placeholder
	values       map[string]string // secret name -> value, once read
	leaves       map[string]*tls.Certificate
	leafOrder    []string // oldest first, for eviction
}

var _ Terminator = (*Broker)(nil)

// NewBroker makes the broker of job for secrets (Effective.Secrets),
// verifying upstream certificates against upstreamRoots (nil: the
// system's roots).
func NewBroker(job string, secrets map[string]Secret, upstreamRoots *x509.CertPool) (*Broker, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("broker ca key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          brokerSerial(),
		Subject:               pkix.Name{CommonName: "agentbox egress " + job, Organization: []string{"agentbox"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(brokerCAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("broker ca: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("broker ca: %w", err)
	}
	b := &Broker{
		job:          job,
		roots:        upstreamRoots,
		sessions:     tls.NewLRUClientSessionCache(brokerLeafCache),
		caCert:       ca,
		caKey:        key,
		caPEM:        pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		placeholders: map[string]string{},
		values:       map[string]string{},
		leaves:       map[string]*tls.Certificate{},
	}
	b.SetSecrets(secrets)
	return b, nil
}

// CAPEM is the job's CA certificate (PEM, the certificate alone), for the
// sandbox's trust bundle.
func (b *Broker) CAPEM() []byte { return slices.Clone(b.caPEM) }

// Placeholders maps each secret's environment variable inside the sandbox
// (Secret.Placeholder, else Secret.Env, else the name upper-cased) to its
// placeholder: "agentbox-placeholder-" and 24 random hex digits, made for
// this broker, worthless to any host. When two secrets name the same
// variable, the first name in sorted order wins.
func (b *Broker) Placeholders() map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	names := make([]string, 0, len(b.secrets))
	for name := range b.secrets {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make(map[string]string, len(names))
	for _, name := range names {
		v := brokerEnvName(name, b.secrets[name])
		if _, ok := out[v]; !ok {
			out[v] = b.placeholders[name]
		}
	}
	return out
}

func brokerEnvName(name string, s Secret) string {
	switch {
	case s.Placeholder != "":
		return s.Placeholder
	case s.Env != "":
		return s.Env
	}
	return strings.ToUpper(name)
}

// SetSecrets replaces the job's secrets (a PATCH changed the policy). A
// secret kept under the same name keeps its placeholder, and its value
// unless where it is read from changed; a new one gets a placeholder of
// its own.
func (b *Broker) SetSecrets(secrets map[string]Secret) {
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.secrets
	b.secrets = make(map[string]Secret, len(secrets))
	for name, s := range secrets {
		s.Hosts = slices.Clone(s.Hosts)
		b.secrets[name] = s
		if _, ok := b.placeholders[name]; !ok {
			b.placeholders[name] = brokerPlaceholder()
		}
		if o, ok := old[name]; !ok || o.Env != s.Env || o.File != s.File {
			delete(b.values, name)
		}
	}
	for name := range b.values {
		if _, ok := b.secrets[name]; !ok {
			delete(b.values, name)
		}
	}
}

func brokerPlaceholder() string {
	var r [12]byte
	rand.Read(r[:])
	return brokerPlaceholderPrefix + hex.EncodeToString(r[:])
}

func brokerSerial() *big.Int {
	var r [16]byte
	rand.Read(r[:])
	r[0] &= 0x7f
	return new(big.Int).SetBytes(r[:])
}

// leaf is the certificate for host, signed by the job's CA, made on first
// use and cached (the oldest evicted past brokerLeafCache).
func (b *Broker) leaf(host string) (*tls.Certificate, error) {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.leaves[host]; ok {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("leaf key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: brokerSerial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     b.caCert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if a, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = []net.IP{a.AsSlice()}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, b.caCert, &key.PublicKey, b.caKey)
	if err != nil {
		return nil, fmt.Errorf("leaf for %s: %w", host, err)
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("leaf for %s: %w", host, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: parsed}
	if len(b.leafOrder) >= brokerLeafCache {
		delete(b.leaves, b.leafOrder[0])
		b.leafOrder = b.leafOrder[1:]
	}
	b.leaves[host] = c
	b.leafOrder = append(b.leafOrder, host)
	return c, nil
}

// errBrokerUnavailable is a secret whose value cannot be had; its message
// names the secret only, never where it is read from nor what was there.
type errBrokerUnavailable struct{ name string }

func (e errBrokerUnavailable) Error() string { return "secret " + e.name + " is not available" }

// brokerInjection is what one request to a secret-bound host gets: the
// header to set and the value with its placeholder, for the response's
// scrubbing.
type brokerInjection struct {
	header      string // canonical header name
	headerValue string
	value       string
	placeholder string
}

// injection is the header for secret name on a request to host:port,
// reading the value on first use. The secret must be bound to host now (a
// PATCH may have unbound it since the connection began), whatever the
// caller thought.
func (b *Broker) injection(name, host string, port int) (brokerInjection, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.secrets[name]
	if !ok || !brokerBound(s, host, port) {
		return brokerInjection{}, errBrokerUnavailable{name}
	}
	hname, tmpl, ok := strings.Cut(s.Header, ":")
	hname = strings.TrimSpace(hname)
	tmpl = strings.TrimSpace(tmpl)
	if !ok || !brokerToken(hname) || !strings.Contains(tmpl, "{value}") {
		return brokerInjection{}, errBrokerUnavailable{name}
	}
	v, ok := b.values[name]
	if !ok {
		read, err := brokerReadValue(s)
		if err != nil {
			return brokerInjection{}, errBrokerUnavailable{name}
		}
		b.values[name] = read
		v = read
	}
	return brokerInjection{
		header:      textproto.CanonicalMIMEHeaderKey(hname),
		headerValue: strings.ReplaceAll(tmpl, "{value}", v),
		value:       v,
		placeholder: b.placeholders[name],
	}, nil
}

func brokerBound(s Secret, host string, port int) bool {
	for _, h := range s.Hosts {
		if r, err := ParseRule(h); err == nil && r.Matches(host, netip.Addr{}, port) {
			return true
		}
	}
	return false
}

// brokerReadValue reads s's value from the server's environment variable
// or file (at most 64 KiB, a regular file, the trailing newline trimmed).
// A value that is empty or holds a control character (it could not go in
// a header) is refused. The error never carries the content.
func brokerReadValue(s Secret) (string, error) {
	var v string
	switch {
	case s.File != "":
		// Without blocking: a FIFO would wait for a writer, holding the
		// broker's lock for every request of the job.
		f, err := os.OpenFile(s.File, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return "", errors.New("unreadable")
		}
		defer f.Close()
		if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
			return "", errors.New("not a regular file")
		}
		data, err := io.ReadAll(io.LimitReader(f, brokerMaxValue+1))
		if err != nil || len(data) > brokerMaxValue {
			return "", errors.New("unreadable or too large")
		}
		v = string(data)
	case s.Env != "":
		v = os.Getenv(s.Env)
	default:
		return "", errors.New("no source")
	}
	v = strings.TrimSuffix(v, "\n")
	v = strings.TrimSuffix(v, "\r")
	if v == "" || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", errors.New("empty or not a header value")
	}
	return v, nil
}

// brokerToken says s is an HTTP header name (RFC 9110 token).
func brokerToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= 0x20 || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
