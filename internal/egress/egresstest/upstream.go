// Package egresstest serves what a sandbox reaches through the egress
// proxy in tests: one HTTPS server on 127.0.0.1 with its own certificate
// authority, answering for every name a test pins to it
// (AGENTBOX_EGRESS_RESOLVE), with a tiny Python package index, a tiny npm
// registry, a git smart-HTTP repository and a download of any size. It
// records each request's host, path and Authorization header, so a test
// can see what a secret-bound host received.
package egresstest

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/githost/gittest"
)

// Upstream is a running server.
type Upstream struct {
	// Port is the HTTPS server's, on 127.0.0.1; HTTPPort the plain
	// HTTP server's (the same handler).
	Port, HTTPPort int
	// CAPEM is the certificate authority that signed the server's
	// certificate; CAFile holds it on disk.
	CAPEM  []byte
	CAFile string
	// Wheel and Tarball are the package files served, for checks.
	Wheel, Tarball []byte

	mu   sync.Mutex
	seen []Request
}

// Request is one request the server answered.
type Request struct {
	Host, Method, Path, Authorization string
}

// Requests returns the requests so far.
func (u *Upstream) Requests() []Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Request(nil), u.seen...)
}

// Start serves until the test ends, with a certificate valid for names.
// A bare repository "repo.git" holding README.md ("hello from git\n") is
// served at /git/repo.git.
func Start(t testing.TB, names ...string) *Upstream {
	t.Helper()
	u := &Upstream{}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "egresstest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "egresstest"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), DNSNames: names,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	u.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	u.CAFile = filepath.Join(t.TempDir(), "egresstest-ca.pem")
	if err := os.WriteFile(u.CAFile, u.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	u.Wheel = wheel(t)
	repos := t.TempDir()
	bare := filepath.Join(repos, "repo.git")
	gittest.Git(t, repos, "init", "-q", "--bare", "-b", "main", bare)
	gittest.Commit(t, bare, "main", gittest.Files("README.md", "hello from git\n"))
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{Path: gitBin, Args: []string{"http-backend"}, Dir: repos,
		Env: []string{"GIT_PROJECT_ROOT=" + repos, "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + repos}}

	tlsSrv := httptest.NewUnstartedServer(nil)
	plain := httptest.NewUnstartedServer(nil)
	h := u.handler(backend, func(r *http.Request) string {
		scheme, port := "https", u.Port
		if r.TLS == nil {
			scheme, port = "http", u.HTTPPort
		}
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port))
	})
	tlsSrv.Config.Handler, plain.Config.Handler = h, h
	tlsSrv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: key}}}
	tlsSrv.StartTLS()
	plain.Start()
	t.Cleanup(tlsSrv.Close)
	t.Cleanup(plain.Close)
	u.Port = tlsSrv.Listener.Addr().(*net.TCPAddr).Port
	u.HTTPPort = plain.Listener.Addr().(*net.TCPAddr).Port
	u.Tarball = tarball(t)
	return u
}

func (u *Upstream) handler(git http.Handler, base func(*http.Request) string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/tinypkg/", func(w http.ResponseWriter, r *http.Request) {
		sum := sha256.Sum256(u.Wheel)
		fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"%s/packages/tinypkg-1.0-py3-none-any.whl#sha256=%x\">tinypkg-1.0-py3-none-any.whl</a></body></html>\n", base(r), sum)
	})
	mux.HandleFunc("/packages/tinypkg-1.0-py3-none-any.whl", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(u.Wheel)
	})
	mux.HandleFunc("/npm/tinypkg", func(w http.ResponseWriter, r *http.Request) {
		sha := sha1.Sum(u.Tarball)
		sri := sha512.Sum512(u.Tarball)
		v := map[string]any{"name": "tinypkg", "version": "1.0.0",
			"dist": map[string]string{"tarball": base(r) + "/npm/tinypkg/-/tinypkg-1.0.0.tgz",
				"shasum": hex.EncodeToString(sha[:]), "integrity": "sha512-" + base64.StdEncoding.EncodeToString(sri[:])}}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"name": "tinypkg", "dist-tags": map[string]string{"latest": "1.0.0"},
			"versions": map[string]any{"1.0.0": v}})
	})
	mux.HandleFunc("/npm/tinypkg/-/tinypkg-1.0.0.tgz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(u.Tarball)
	})
	mux.Handle("/git/", http.StripPrefix("/git", git))
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.URL.Query().Get("bytes"), 10, 64)
		if err != nil || n < 0 || n > 8<<30 {
			http.Error(w, "bytes=N, at most 8 GiB", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		buf := bytes.Repeat([]byte("x"), 256<<10)
		for n > 0 {
			k := min(n, int64(len(buf)))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s %s\n", r.Host, r.Method)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		u.mu.Lock()
		u.seen = append(u.seen, Request{Host: host, Method: r.Method, Path: r.URL.Path, Authorization: r.Header.Get("Authorization")})
		u.mu.Unlock()
		mux.ServeHTTP(w, r)
	})
}

// wheel is tinypkg 1.0, a pure-Python wheel whose module says hello.
func wheel(t testing.TB) []byte {
	files := []struct{ name, body string }{
		{"tinypkg/__init__.py", "GREETING = 'hello from tinypkg'\n"},
		{"tinypkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n"},
		{"tinypkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: egresstest\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, f.body)
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString("tinypkg-1.0.dist-info/RECORD,,\n")
	w, err := zw.Create("tinypkg-1.0.dist-info/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, record.String())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tarball is the npm package tinypkg 1.0.0.
func tarball(t testing.TB) []byte {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct{ name, body string }{
		{"package/package.json", `{"name": "tinypkg", "version": "1.0.0", "main": "index.js"}` + "\n"},
		{"package/index.js", "module.exports = 'hello from tinypkg';\n"},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: time.Unix(1e9, 0)}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, f.body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
