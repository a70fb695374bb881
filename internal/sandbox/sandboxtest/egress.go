package sandboxtest

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/sandbox"
)

// viaHost stands in for the host's egress proxy: it answers any HTTP
// request with "via-host" and records the hosts asked for.
type viaHost struct {
	mu     sync.Mutex
	hosts  []string
	setups []time.Duration // of the connections measureEgress makes
}

func (v *viaHost) handle(conn net.Conn) {
	arrived := time.Now()
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	if line, _ := br.Peek(2); string(line) == "T=" {
		v.answerSetup(conn, br, arrived)
		return
	}
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	v.mu.Lock()
	v.hosts = append(v.hosts, req.URL.Host)
	v.mu.Unlock()
	if req.URL.Host == bulkHost {
		conn.SetDeadline(time.Now().Add(5 * time.Minute))
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", bulkBytes)
		zeros := make([]byte, 1<<20)
		for range bulkBytes / len(zeros) {
			if _, err := conn.Write(zeros); err != nil {
				return
			}
		}
		return
	}
	io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nvia-host")
}

// The host name and size of the measured download (testEgress's
// benchmark).
const (
	bulkHost  = "bulk.test"
	bulkBytes = 256 << 20
)

// testEgress: the sandbox's only way out is the guest's egress listener,
// carried to the host (guest.ServeEgress); nothing else leaves it.
func testEgress(t *testing.T, d sandbox.Driver) {
	s := create(t, d, sandbox.Spec{})
	// gVisor has no /sys/class/net; its /proc/net/dev lists the same.
	if ifaces := ok(t, s, "ls /sys/class/net 2>/dev/null || tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"); ifaces != "lo" {
		// Nothing below may run where a packet could leave.
		t.Fatalf("network interfaces %q, want only lo", ifaces)
	}
	v := &viaHost{}
	ctx, cancel := context.WithCancel(bg)
	served := make(chan error, 1)
	go func() { served <- guest.ServeEgress(ctx, s.Guest(), 4, v.handle) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("ServeEgress: %v", err)
		}
	}()

	proxy := "http://127.0.0.1:" + strconv.Itoa(guest.EgressPort)
	if got := ok(t, s, "curl -sS --max-time 30 -x "+proxy+" http://anything.test/"); got != "via-host" {
		t.Errorf("curl through the egress listener printed %q, want via-host", got)
	}
	v.mu.Lock()
	if !slices.Contains(v.hosts, "anything.test") {
		t.Errorf("the host saw requests for %q, not anything.test", v.hosts)
	}
	v.mu.Unlock()

	// No route without the proxy: refused at once, not timed out (Linux
	// says ENETUNREACH, gVisor's netstack EHOSTUNREACH).
	res := sh(t, s, "timeout 10 bash -c 'exec 3<>/dev/tcp/192.0.2.1/80' 2>&1; echo exit $?")
	out := string(res.Stdout)
	if !strings.Contains(out, "Network is unreachable") && !strings.Contains(out, "No route to host") || strings.Contains(out, "exit 124") {
		t.Errorf("a direct connection to 192.0.2.1: %q, want Network is unreachable at once", out)
	}
	// No DNS inside.
	if res := sh(t, s, "timeout 30 getent hosts example.com"); res.ExitCode == 0 {
		t.Errorf("getent hosts example.com resolved inside: %q", res.Stdout)
	}

	checkEgressCA(t, s)
	if os.Getenv("AGENTBOX_EGRESS_BENCH") != "" {
		v.measure(t, s, proxy)
	}
}

// checkEgressCA: SetEgressCA writes a bundle of the image's roots and the
// proxy's CA where the sandbox's processes can read it.
func checkEgressCA(t *testing.T, s sandbox.Sandbox) {
	ca := selfSignedPEM(t, "agentbox conformance egress CA")
	path, err := s.Guest().SetEgressCA(bg, ca)
	if err != nil || path != guest.EgressCABundle {
		t.Fatalf("SetEgressCA: %q, %v; want %s", path, err, guest.EgressCABundle)
	}
	const sys = "/etc/ssl/certs/ca-certificates.crt"
	got := ok(t, s, fmt.Sprintf(`head -c "$(wc -c < %[1]s)" %[2]s | cmp -s - %[1]s && echo system-first; `+
		`grep -c 'BEGIN CERTIFICATE' %[1]s %[2]s | cut -d: -f2 | tr '\n' ' '`, sys, path))
	f := strings.Fields(got)
	if len(f) != 3 || f[0] != "system-first" || f[1] == "0" || atoi(f[2]) != atoi(f[1])+1 {
		t.Errorf("bundle %s: %q, want the system's roots (all of them, first) and one more", path, got)
	}
	tail := ok(t, s, fmt.Sprintf("tail -c %d %s", len(ca), path))
	if tail != strings.TrimSpace(string(ca)) {
		t.Errorf("bundle %s does not end with the CA", path)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// selfSignedPEM is a CA certificate named cn.
func selfSignedPEM(t *testing.T, cn string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// answerSetup reads "T=<ns>" (when the process inside began to connect,
// by the clock it shares with the host on the container tier), records how
// long the connection took to reach the host, and answers one byte.
func (v *viaHost) answerSetup(conn net.Conn, br *bufio.Reader, arrived time.Time) {
	line, err := br.ReadString('\n')
	if err != nil {
		return
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "T=")), 10, 64)
	if err != nil {
		return
	}
	v.mu.Lock()
	v.setups = append(v.setups, arrived.Sub(time.Unix(0, ns)))
	v.mu.Unlock()
	conn.Write([]byte("k"))
}

// setupProbe connects to the egress listener 200 times, one after the
// other, each time sending when it began.
const setupProbe = `
import socket, time
for i in range(200):
    t0 = time.time_ns()
    s = socket.create_connection(("127.0.0.1", %d))
    s.sendall(b"T=%%d\n" %% t0)
    s.recv(1)
    s.close()
`

// measure logs the set-up time of connections through the channel
// (p50, p95) and the throughput of a 256 MiB download through it.
func (v *viaHost) measure(t *testing.T, s sandbox.Sandbox, proxy string) {
	ok(t, s, "python3 -c '"+fmt.Sprintf(setupProbe, guest.EgressPort)+"'")
	v.mu.Lock()
	d := slices.Clone(v.setups)
	v.mu.Unlock()
	slices.Sort(d)
	if len(d) != 200 {
		t.Fatalf("%d set-up probes reached the host, want 200", len(d))
	}
	t.Logf("egress set-up (local connect to the host's handler), %d connections: p50 %v, p95 %v, max %v",
		len(d), d[len(d)/2], d[len(d)*95/100], d[len(d)-1])

	out := ok(t, s, "curl -sS --max-time 300 -x "+proxy+" -o /dev/null -w '%{size_download} %{time_total}' http://"+bulkHost+"/")
	f := strings.Fields(out)
	if len(f) != 2 || atoi(f[0]) != bulkBytes {
		t.Fatalf("bulk download: %q, want %d bytes", out, bulkBytes)
	}
	secs, _ := strconv.ParseFloat(f[1], 64)
	t.Logf("egress throughput: %d MiB in %.2fs, %.0f MiB/s", bulkBytes>>20, secs, float64(bulkBytes>>20)/secs)
}
