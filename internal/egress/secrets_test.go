package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// brokerTestHost is the name the upstream test server answers for; it is
// never resolved: the test's transport dials through the broker.
const brokerTestHost = "api.test"

const brokerTestValue = "ghp_TheRealValue0123456789abcdefXYZ"

// brokerTestCA is a test CA and a server certificate it signs for
// api.test and 127.0.0.1.
func brokerTestCA(t testing.TB) (*x509.CertPool, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: brokerSerial(), Subject: pkix.Name{CommonName: "test upstream CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: brokerSerial(), Subject: pkix.Name{CommonName: brokerTestHost},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{brokerTestHost}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// brokerFixture is an upstream HTTPS server on 127.0.0.1 and an
// http.Client whose every connection is a net.Pipe into Broker.Terminate,
// which reaches the server over a real TCP connection.
type brokerFixture struct {
	b      *Broker
	srv    *httptest.Server
	client *http.Client
	term   Termination    // Host, Port, Secret, Decide for each connection
	pool   *x509.CertPool // the upstream's CA

	mu       sync.Mutex
	seen     []string
	dials    int
	termErrs []error
	wg       sync.WaitGroup
}

type brokerOpts struct {
	secrets  map[string]Secret
	secret   string // Termination.Secret
	roots    *x509.CertPool
	untrust  bool // the broker does not trust the server's CA
	decide   func(method, path string) Decision
	sni      string // the client's server name; brokerTestHost when empty
	handler  http.Handler
	noClient bool
}

func newBrokerFixture(t testing.TB, o brokerOpts) *brokerFixture {
	t.Helper()
	pool, cert := brokerTestCA(t)
	srv := httptest.NewUnstartedServer(o.handler)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // connections the broker never uses
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := pool
	if o.untrust {
		roots = x509.NewCertPool()
	}
	b, err := NewBroker("job-1", o.secrets, roots)
	if err != nil {
		t.Fatal(err)
	}
	decide := o.decide
	if decide == nil {
		decide = func(string, string) Decision { return Decision{Allowed: true} }
	}
	f := &brokerFixture{b: b, srv: srv, pool: pool}
	f.term = Termination{Host: brokerTestHost, Port: 443, Secret: o.secret, Decide: decide}
	f.term.Seen = func(method, path string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.seen = append(f.seen, method+" "+path)
	}
	sandboxRoots := x509.NewCertPool()
	if !sandboxRoots.AppendCertsFromPEM(b.CAPEM()) {
		t.Fatal("CAPEM holds no certificate")
	}
	sni := o.sni
	if sni == "" {
		sni = brokerTestHost
	}
	tr := &http.Transport{
		DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			conn, err := f.dial(ctx)
			if err != nil {
				return nil, err
			}
			tc := tls.Client(conn, &tls.Config{ServerName: sni, RootCAs: sandboxRoots, NextProtos: []string{"http/1.1"}})
			if err := tc.HandshakeContext(ctx); err != nil {
				tc.Close()
				return nil, err
			}
			return tc, nil
		},
		DisableCompression: true,
	}
	f.client = &http.Client{Transport: tr}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		f.wg.Wait()
		for _, err := range f.termErrs {
			if err != nil && strings.Contains(err.Error(), brokerTestValue) {
				t.Errorf("Terminate's error holds the value: %v", err)
			}
		}
	})
	return f
}

// dial is the sandbox's side of one connection: the broker serves the
// other end of the pipe.
func (f *brokerFixture) dial(ctx context.Context) (net.Conn, error) {
	up, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		return nil, err
	}
	sandbox, proxy := net.Pipe()
	term := f.term
	term.Upstream = up
	f.mu.Lock()
	f.dials++
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		err := f.b.Terminate(context.WithoutCancel(ctx), proxy, term)
		f.mu.Lock()
		f.termErrs = append(f.termErrs, err)
		f.mu.Unlock()
	}()
	return sandbox, nil
}

func (f *brokerFixture) do(t testing.TB, method, path string, body io.Reader, hdr http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, "https://"+brokerTestHost+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp, string(b)
}

func brokerGitHub(env string) map[string]Secret {
	return map[string]Secret{"github": {Hosts: []string{brokerTestHost}, Header: "Authorization: Bearer {value}", Env: env}}
}

func TestBrokerInjectsSecret(t *testing.T) {
	t.Setenv("AGENTBOX_TEST_GH_TOKEN", brokerTestValue)
	var mu sync.Mutex
	var got []string
	f := newBrokerFixture(t, brokerOpts{
		secrets: brokerGitHub("AGENTBOX_TEST_GH_TOKEN"), secret: "github",
		handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got = append(got, r.Host+" "+strings.Join(r.Header.Values("Authorization"), "|")+" "+r.Header.Get("User-Agent")+r.Header.Get("Range"))
			mu.Unlock()
			io.WriteString(w, "ok")
		}),
	})
	ph := f.b.Placeholders()["AGENTBOX_TEST_GH_TOKEN"]
	if !regexp.MustCompile(`^agentbox-placeholder-[0-9a-f]{24}$`).MatchString(ph) {
		t.Fatalf("placeholder %q", ph)
	}
	// The sandbox sends its placeholder, twice, and another Host.
	resp, body := f.do(t, "GET", "/user?page=2", nil, http.Header{"Authorization": {"Bearer " + ph, "token " + ph}, "User-Agent": {"gh/2"}, "Range": {"bytes=3-9"}})
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	req, _ := http.NewRequest("GET", "https://"+brokerTestHost+"/repos", nil)
	req.Host = "evil.test"
	req.Header["User-Agent"] = []string{""} // sends none
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	want := []string{
		brokerTestHost + " Bearer " + brokerTestValue + " gh/2",
		brokerTestHost + " Bearer " + brokerTestValue + " ", // no User-Agent added for the sandbox
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("upstream saw\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	f.client.CloseIdleConnections()
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dials != 1 || len(f.termErrs) != 1 || f.termErrs[0] != nil {
		t.Errorf("%d connections for two requests, want 1 (keep-alive); Terminate returned %v", f.dials, f.termErrs)
	}
	if strings.Join(f.seen, ",") != "GET /user,GET /repos" {
		t.Errorf("seen %q", f.seen)
	}
}

func TestBrokerScrubsEcho(t *testing.T) {
	t.Setenv("AGENTBOX_TEST_GH_TOKEN", brokerTestValue)
	split := len(brokerTestValue) / 2
	f := newBrokerFixture(t, brokerOpts{
		secrets: brokerGitHub("AGENTBOX_TEST_GH_TOKEN"), secret: "github",
		handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			auth := r.Header.Get("Authorization")
			w.Header().Set("X-Echo", auth)
			w.Header().Set("X-"+brokerTestValue, "name")
			if r.URL.Path == "/sized" {
				body := "auth=" + auth + ";again=" + brokerTestValue
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				io.WriteString(w, body)
				return
			}
			io.WriteString(w, "start:"+brokerTestValue[:split])
			w.(http.Flusher).Flush()
			io.WriteString(w, brokerTestValue[split:]+":mid:"+brokerTestValue[:1])
			w.(http.Flusher).Flush()
			io.WriteString(w, brokerTestValue[1:]+brokerTestValue[:len(brokerTestValue)-1]+":end")
		}),
	})
	ph := f.b.Placeholders()["AGENTBOX_TEST_GH_TOKEN"]
	for _, tc := range []struct{ path, want string }{
		{"/split", "start:" + ph + ":mid:" + ph + brokerTestValue[:len(brokerTestValue)-1] + ":end"},
		{"/sized", "auth=Bearer " + ph + ";again=" + ph},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, body := f.do(t, "GET", tc.path, nil, nil)
			if body != tc.want {
				t.Errorf("body %q\nwant %q", body, tc.want)
			}
			if got := resp.Header.Get("X-Echo"); got != "Bearer "+ph {
				t.Errorf("X-Echo %q", got)
			}
			if resp.Header.Get("X-"+ph) != "name" {
				t.Errorf("a header named after the value was not renamed: %v", resp.Header)
			}
			var all bytes.Buffer
			resp.Header.Write(&all)
			if strings.Contains(strings.ToLower(all.String()+body), strings.ToLower(brokerTestValue)) {
				t.Errorf("the value reached the sandbox")
			}
			if resp.ContentLength != -1 || resp.TransferEncoding[0] != "chunked" {
				t.Errorf("a scrubbed body keeps length %d, %v", resp.ContentLength, resp.TransferEncoding)
			}
		})
	}
}

// TestBrokerRefusesCompressedEcho: a body the broker cannot read for the
// value (the upstream compressed it though asked not to) is not passed on.
func TestBrokerRefusesCompressedEcho(t *testing.T) {
	t.Setenv("AGENTBOX_TEST_GH_TOKEN", brokerTestValue)
	f := newBrokerFixture(t, brokerOpts{
		secrets: brokerGitHub("AGENTBOX_TEST_GH_TOKEN"), secret: "github",
		handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if ae := r.Header.Get("Accept-Encoding"); ae != "identity" {
				t.Errorf("Accept-Encoding %q upstream", ae)
			}
			w.Header().Set("Content-Encoding", "gzip")
			if r.URL.Path == "/two" { // a first line saying identity
				w.Header()["Content-Encoding"] = []string{"identity", "gzip"}
			}
			io.WriteString(w, "\x1f\x8b compressed echo")
		}),
	})
	for _, path := range []string{"/", "/two"} {
		resp, body := f.do(t, "GET", path, nil, http.Header{"Accept-Encoding": {"gzip"}})
		if resp.StatusCode != 502 || !strings.Contains(body, "Content-Encoding gzip") || strings.Contains(body, "compressed echo") {
			t.Errorf("%s: got %d %q", path, resp.StatusCode, body)
		}
	}
}

// TestBrokerExpectContinue: the broker answers 100 Continue itself and
// streams the body after it.
func TestBrokerExpectContinue(t *testing.T) {
	f := newBrokerFixture(t, brokerOpts{handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, "got "+string(b)+" "+r.Header.Get("Expect"))
	})})
	conn, br := brokerRaw(t, f)
	io.WriteString(conn, "POST /p HTTP/1.1\r\nHost: api.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 100 {
		t.Fatalf("want 100 Continue first: %v %v", resp, err)
	}
	io.WriteString(conn, "hello")
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "got hello " {
		t.Errorf("got %d %q", resp.StatusCode, b)
	}
}

// TestBrokerStopsWithContext: cancelling the job's context ends a
// terminated connection that is waiting for the sandbox.
func TestBrokerStopsWithContext(t *testing.T) {
	b, err := NewBroker("job-1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sandbox, proxy := net.Pipe()
	up1, up2 := net.Pipe()
	defer up2.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.Terminate(ctx, proxy, Termination{Host: brokerTestHost, Port: 443, Upstream: up1,
			Decide: func(string, string) Decision { return Decision{Allowed: true} }})
	}()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(b.CAPEM())
	tc := tls.Client(sandbox, &tls.Config{ServerName: brokerTestHost, RootCAs: roots})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Terminate goes on after its context ended")
	}
	if _, err := tc.Read(make([]byte, 1)); err == nil {
		t.Error("the sandbox's connection is still open")
	}
}

func TestBrokerRefusesWrongSNI(t *testing.T) {
	var hits int
	f := newBrokerFixture(t, brokerOpts{
		sni:     "other.test",
		handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits++ }),
	})
	req, _ := http.NewRequest("GET", "https://"+brokerTestHost+"/", nil)
	if _, err := f.client.Do(req); err == nil {
		t.Fatal("a handshake for another name succeeded")
	}
	f.wg.Wait()
	if len(f.termErrs) != 1 || f.termErrs[0] == nil || !strings.Contains(f.termErrs[0].Error(), `"other.test" is not api.test`) {
		t.Errorf("Terminate returned %v", f.termErrs)
	}
	if hits != 0 {
		t.Errorf("the upstream got %d requests", hits)
	}
}

func TestBrokerVerifiesUpstream(t *testing.T) {
	t.Setenv("AGENTBOX_TEST_GH_TOKEN", brokerTestValue)
	var hits int
	f := newBrokerFixture(t, brokerOpts{
		secrets: brokerGitHub("AGENTBOX_TEST_GH_TOKEN"), secret: "github", untrust: true,
		handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits++ }),
	})
	resp, body := f.do(t, "GET", "/user", nil, nil)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "certificate signed by unknown authority") {
		t.Errorf("got %d %q", resp.StatusCode, body)
	}
	if strings.Contains(body, brokerTestValue) {
		t.Error("the value is in the answer")
	}
	if hits != 0 || len(f.seen) != 0 {
		t.Errorf("an unverified upstream got %d requests (seen %v)", hits, f.seen)
	}
}

func TestBrokerRestrictsMethods(t *testing.T) {
	rule, err := ParseRule(brokerTestHost)
	if err != nil {
		t.Fatal(err)
	}
	rule.Methods = []string{"GET", "HEAD"}
	eff := Effective{Mode: ModeAllow, Allow: []Rule{rule}}
	var mu sync.Mutex
	var got []string
	f := newBrokerFixture(t, brokerOpts{
		decide: func(m, _ string) Decision { return eff.Decide(brokerTestHost, netip.Addr{}, 443, m) },
		handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
			mu.Unlock()
			io.WriteString(w, "fine")
		}),
	})
	resp, body := f.do(t, "GET", "/a", nil, http.Header{"Authorization": {"mine"}})
	if resp.StatusCode != 200 || body != "fine" || resp.ContentLength != 4 {
		t.Fatalf("GET: %d %q, length %d", resp.StatusCode, body, resp.ContentLength)
	}
	resp, body = f.do(t, "POST", "/b", strings.NewReader(strings.Repeat("x", 10000)), nil)
	want := "agentbox egress proxy: refused api.test: api.test allows only GET, HEAD\n"
	if resp.StatusCode != 403 || body != want || resp.Header.Get("X-Agentbox-Egress") != "denied" {
		t.Errorf("POST: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, _ = f.do(t, "GET", "/c", nil, nil)
	if resp.StatusCode != 200 {
		t.Errorf("GET after a refusal: %d", resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, ",") != "GET /a mine,GET /c " {
		t.Errorf("upstream saw %q", got)
	}
	if f.dials != 1 {
		t.Errorf("%d connections, want 1: a refusal keeps the connection", f.dials)
	}
}

// TestBrokerRefusesHead: a refused HEAD gets no body, so the connection
// goes on in step.
func TestBrokerRefusesHead(t *testing.T) {
	f := newBrokerFixture(t, brokerOpts{
		decide:  func(string, string) Decision { return Decision{Reason: "no"} },
		handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("forwarded") }),
	})
	for _, m := range []string{"HEAD", "GET", "HEAD", "GET"} {
		resp, body := f.do(t, m, "/x", nil, nil)
		want := "agentbox egress proxy: refused api.test: no\n"
		if m == "HEAD" {
			want = ""
		}
		if resp.StatusCode != 403 || body != want {
			t.Errorf("%s: %d %q", m, resp.StatusCode, body)
		}
	}
	if f.dials != 1 {
		t.Errorf("%d connections, want 1", f.dials)
	}
}

func TestBrokerValueSources(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", brokerTestValue+"\n")
	empty := write("empty", "\n")
	big := write("big", "SECRET-CONTENT"+strings.Repeat("y", 64<<10))
	bad := write("bad", "two\nlines\n")
	fifo := filepath.Join(dir, "fifo") // a FIFO nobody writes: opening it waits for a writer
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTBOX_TEST_SET", brokerTestValue)
	os.Unsetenv("AGENTBOX_TEST_UNSET")
	for _, tc := range []struct {
		name string
		s    Secret
		ok   bool
	}{
		{"env", Secret{Env: "AGENTBOX_TEST_SET"}, true},
		{"file", Secret{File: good}, true},
		{"env unset", Secret{Env: "AGENTBOX_TEST_UNSET"}, false},
		{"file missing", Secret{File: filepath.Join(dir, "nope")}, false},
		{"file empty", Secret{File: empty}, false},
		{"file over 64 KiB", Secret{File: big}, false},
		{"file of two lines", Secret{File: bad}, false},
		{"directory", Secret{File: dir}, false},
		{"FIFO", Secret{File: fifo}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits []string
			s := tc.s
			s.Hosts, s.Header = []string{brokerTestHost}, "X-Api-Key: k={value}"
			f := newBrokerFixture(t, brokerOpts{
				secrets: map[string]Secret{"key": s}, secret: "key",
				handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					hits = append(hits, r.Header.Get("X-Api-Key"))
				}),
			})
			resp, body := f.do(t, "GET", "/", nil, nil)
			if tc.ok {
				if resp.StatusCode != 200 || len(hits) != 1 || hits[0] != "k="+brokerTestValue {
					t.Errorf("got %d, upstream saw %q", resp.StatusCode, hits)
				}
				return
			}
			if resp.StatusCode != 502 || body != "agentbox egress proxy: secret key is not available\n" {
				t.Errorf("got %d %q", resp.StatusCode, body)
			}
			if len(hits) != 0 || f.dials != 1 || len(f.seen) != 0 {
				t.Errorf("upstream saw %q, seen %v", hits, f.seen)
			}
		})
	}
}

// TestBrokerReadsValueLazily: the value is read on the first request, not
// when the broker is made, and kept.
func TestBrokerReadsValueLazily(t *testing.T) {
	var hits []string
	f := newBrokerFixture(t, brokerOpts{
		secrets: brokerGitHub("AGENTBOX_TEST_LAZY"), secret: "github",
		handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits = append(hits, r.Header.Get("Authorization")) }),
	})
	t.Setenv("AGENTBOX_TEST_LAZY", "first-value")
	f.do(t, "GET", "/", nil, nil)
	t.Setenv("AGENTBOX_TEST_LAZY", "second-value")
	f.do(t, "GET", "/", nil, nil)
	// A PATCH that reads it from elsewhere drops the value kept.
	t.Setenv("AGENTBOX_TEST_LAZY2", "third-value")
	f.b.SetSecrets(brokerGitHub("AGENTBOX_TEST_LAZY2"))
	f.do(t, "GET", "/", nil, nil)
	// A PATCH that binds it elsewhere stops it on a connection already open.
	moved := brokerGitHub("AGENTBOX_TEST_LAZY2")
	moved["github"] = Secret{Hosts: []string{"elsewhere.test"}, Header: moved["github"].Header, Env: "AGENTBOX_TEST_LAZY2"}
	f.b.SetSecrets(moved)
	if resp, _ := f.do(t, "GET", "/", nil, nil); resp.StatusCode != 502 {
		t.Errorf("a secret no longer bound to the host: %d", resp.StatusCode)
	}
	if strings.Join(hits, ",") != "Bearer first-value,Bearer first-value,Bearer third-value" || f.dials != 1 {
		t.Errorf("upstream saw %q over %d connections", hits, f.dials)
	}
}

func TestBrokerStreamsChunkedUpload(t *testing.T) {
	gotFirst := make(chan struct{})
	var total int
	var te []string
	f := newBrokerFixture(t, brokerOpts{
		handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			te = r.TransferEncoding
			buf := make([]byte, 5)
			if _, err := io.ReadFull(r.Body, buf); err != nil || string(buf) != "first" {
				t.Errorf("first part %q %v", buf, err)
			}
			close(gotFirst)
			n, _ := io.Copy(io.Discard, r.Body)
			total = 5 + int(n)
			io.WriteString(w, "done")
		}),
	})
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte("first"))
		// The rest is written only once the upstream has the first part:
		// a broker that buffered the body would never forward it.
		<-gotFirst
		for range 64 {
			pw.Write(bytes.Repeat([]byte("z"), 16<<10))
		}
		pw.Close()
	}()
	resp, body := f.do(t, "PUT", "/upload", pr, nil)
	if resp.StatusCode != 200 || body != "done" || total != 5+64*16<<10 || len(te) != 1 || te[0] != "chunked" {
		t.Errorf("got %d %q, upstream read %d bytes, %v", resp.StatusCode, body, total, te)
	}
}

// TestBrokerEarlyAnswer: an upstream that answers before reading an upload
// gets its answer to the sandbox, and the connection ends without hanging.
func TestBrokerEarlyAnswer(t *testing.T) {
	f := newBrokerFixture(t, brokerOpts{handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
	})})
	pr, pw := io.Pipe()
	go func() {
		for range 256 {
			if _, err := pw.Write(bytes.Repeat([]byte("u"), 16<<10)); err != nil {
				return
			}
		}
		pw.Close()
	}()
	defer pr.Close()
	resp, _ := f.do(t, "PUT", "/big", pr, nil)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("got %d", resp.StatusCode)
	}
	pr.Close()
	f.wg.Wait()
	if len(f.termErrs) != 1 || f.termErrs[0] != nil {
		t.Errorf("Terminate returned %v", f.termErrs)
	}
}

// brokerRaw opens one connection to the broker and returns the sandbox's
// TLS end, for requests an http.Client would not send.
func brokerRaw(t *testing.T, f *brokerFixture) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := f.dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(f.b.CAPEM())
	tc := tls.Client(conn, &tls.Config{ServerName: brokerTestHost, RootCAs: roots})
	t.Cleanup(func() { tc.Close() })
	return tc, bufio.NewReader(tc)
}

func TestBrokerRefusesOddRequests(t *testing.T) {
	var hits int
	for _, tc := range []struct {
		name, req string
		code      int
	}{
		{"upgrade", "GET /ws HTTP/1.1\r\nHost: api.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", 501},
		{"connect", "CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n", 501},
		{"long target", "GET /" + strings.Repeat("a", 9000) + " HTTP/1.1\r\nHost: api.test\r\n\r\n", 414},
		{"huge headers", "GET / HTTP/1.1\r\nHost: api.test\r\n" + strings.Repeat("X-A: "+strings.Repeat("b", 1000)+"\r\n", 200) + "\r\n", 431},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newBrokerFixture(t, brokerOpts{handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits++ })})
			conn, br := brokerRaw(t, f)
			go io.WriteString(conn, tc.req)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.code || !resp.Close {
				t.Errorf("got %d (close %v), want %d", resp.StatusCode, resp.Close, tc.code)
			}
		})
	}
	if hits != 0 {
		t.Errorf("the upstream got %d requests", hits)
	}
}

func TestBrokerCA(t *testing.T) {
	b, err := NewBroker("job-7", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pemBytes := b.CAPEM()
	block, rest := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		t.Fatalf("CAPEM is not one certificate block: %q", pemBytes)
	}
	if bytes.Contains(pemBytes, []byte("PRIVATE")) {
		t.Fatal("CAPEM holds a key")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 || ca.Subject.CommonName != "agentbox egress job-7" {
		t.Errorf("CA: IsCA %v, usage %v, CN %q", ca.IsCA, ca.KeyUsage, ca.Subject.CommonName)
	}
	if pub, ok := ca.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("CA key %T, want ECDSA P-256", ca.PublicKey)
	}
	if d := time.Until(ca.NotBefore); d > -59*time.Minute || d < -61*time.Minute {
		t.Errorf("not before %v", ca.NotBefore)
	}
	if d := time.Until(ca.NotAfter); d < 7*24*time.Hour-time.Minute || d > 7*24*time.Hour {
		t.Errorf("not after %v", ca.NotAfter)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, host := range []string{"api.test", "127.0.0.1", "::1"} {
		leaf, err := b.leaf(host)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("leaf for %s: %v", host, err)
		}
		if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "other.test", Roots: roots}); err == nil {
			t.Errorf("leaf for %s is good for other.test", host)
		}
		if again, _ := b.leaf(strings.ToUpper(host)); again != leaf {
			t.Errorf("leaf for %s is not cached", host)
		}
	}
	other, _ := NewBroker("job-8", nil, nil)
	leaf, _ := other.leaf("api.test")
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: "api.test", Roots: roots}); err == nil {
		t.Error("another job's leaf chains to this job's CA")
	}
	for i := range brokerLeafCache + 10 {
		b.leaf("h" + strconv.Itoa(i) + ".test")
	}
	if len(b.leaves) != brokerLeafCache || len(b.leafOrder) != brokerLeafCache {
		t.Errorf("%d leaves cached, want %d", len(b.leaves), brokerLeafCache)
	}
}

func TestBrokerPlaceholders(t *testing.T) {
	b, err := NewBroker("job-1", map[string]Secret{
		"github": {Env: "GH_TOKEN"},
		"npm":    {File: "/x", Placeholder: "NPM_TOKEN"},
		"pypi":   {File: "/y"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := b.Placeholders()
	re := regexp.MustCompile(`^agentbox-placeholder-[0-9a-f]{24}$`)
	if len(first) != 3 {
		t.Fatalf("placeholders %v", first)
	}
	for _, env := range []string{"GH_TOKEN", "NPM_TOKEN", "PYPI"} {
		if !re.MatchString(first[env]) {
			t.Errorf("%s: %q", env, first[env])
		}
	}
	if first["GH_TOKEN"] == first["PYPI"] {
		t.Error("two secrets share a placeholder")
	}
	b.SetSecrets(map[string]Secret{"github": {Env: "GH_TOKEN"}, "extra": {Env: "EXTRA"}})
	now := b.Placeholders()
	if len(now) != 2 || now["GH_TOKEN"] != first["GH_TOKEN"] || !re.MatchString(now["EXTRA"]) {
		t.Errorf("after SetSecrets: %v (before %v)", now, first)
	}
	other, _ := NewBroker("job-2", map[string]Secret{"github": {Env: "GH_TOKEN"}}, nil)
	if other.Placeholders()["GH_TOKEN"] == first["GH_TOKEN"] {
		t.Error("two jobs share a placeholder")
	}
}

func TestBrokerReplacer(t *testing.T) {
	old, repl := "SECRETVALUE", "ph"
	in := "aSECRETVALUEbSECRETSECRETVALUEcSECRETVALUESECRETVALUEdSECRETVALU"
	want := strings.ReplaceAll(in, old, repl)
	// Every way of cutting the input in three writes.
	for i := 0; i <= len(in); i++ {
		for j := i; j <= len(in); j++ {
			var out bytes.Buffer
			r := &brokerReplacer{w: &out, old: []byte(old), new: []byte(repl)}
			r.Write([]byte(in[:i]))
			r.Write([]byte(in[i:j]))
			r.Write([]byte(in[j:]))
			r.Close()
			if out.String() != want {
				t.Fatalf("cut at %d,%d: %q, want %q", i, j, out.String(), want)
			}
		}
	}
}
