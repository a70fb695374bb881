package daemon_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/guest/daemon"
	"github.com/agentbox/agentbox/internal/guest/daemon/daemontest"
)

// withEgress gives the guest an egress listener on a free loopback port
// (not guest.EgressPort: tests run side by side) and returns its address.
func withEgress(t *testing.T, wait time.Duration) (func(*daemon.Config), string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return func(c *daemon.Config) { c.Egress, c.EgressWait = l, wait }, l.Addr().String()
}

// egressClients are the host's clients of one guest with an egress
// listener, over a unix socket and over TCP with the sandbox's secret.
func egressClients(t *testing.T, wait time.Duration) map[string]struct {
	c    *guest.Client
	addr string
} {
	t.Helper()
	out := map[string]struct {
		c    *guest.Client
		addr string
	}{}
	mod, addr := withEgress(t, wait)
	c, _ := start(t, mod)
	out["unix"] = struct {
		c    *guest.Client
		addr string
	}{c, addr}

	const secret = "0123456789abcdef0123456789abcdef"
	l, err := daemon.Listen(guest.Listener{Network: "tcp", Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	mod, addr = withEgress(t, wait)
	cfg := daemon.Config{Workspace: t.TempDir(), Secret: secret}
	mod(&cfg)
	daemontest.Serve(t, l, cfg)
	tc := guest.New(guest.TCPDialer(l.Addr().String()), secret)
	t.Cleanup(tc.Close)
	out["tcp+secret"] = struct {
		c    *guest.Client
		addr string
	}{tc, addr}
	return out
}

// acceptOne posts one accept and returns what it yields.
func acceptOne(ctx context.Context, c *guest.Client) <-chan net.Conn {
	got := make(chan net.Conn, 1)
	go func() {
		conn, err := c.Egress(ctx)
		if err != nil {
			close(got)
			return
		}
		got <- conn
	}()
	return got
}

func TestEgressRelaysBothWaysAndHalfCloses(t *testing.T) {
	up := make([]byte, 3<<20)
	down := make([]byte, 5<<20)
	rand.Read(up)
	rand.Read(down)
	for name, g := range egressClients(t, time.Minute) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			accepted := acceptOne(ctx, g.c)
			local, err := net.Dial("tcp", g.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer local.Close()
			host := <-accepted
			if host == nil {
				t.Fatal("no connection came through the accept")
			}
			defer host.Close()
			host.SetDeadline(time.Now().Add(20 * time.Second)) // a lost EOF fails, not hangs
			local.SetDeadline(time.Now().Add(20 * time.Second))
			// The process sends, then half-closes: the host reads all of
			// it and EOF, and can still answer.
			go func() {
				local.Write(up)
				local.(*net.TCPConn).CloseWrite()
			}()
			got, err := io.ReadAll(host)
			if err != nil || !bytes.Equal(got, up) {
				t.Fatalf("host read %d bytes (%v), want the %d sent", len(got), err, len(up))
			}
			go func() {
				host.Write(down)
				host.(interface{ CloseWrite() error }).CloseWrite()
			}()
			got, err = io.ReadAll(local)
			if err != nil || !bytes.Equal(got, down) {
				t.Fatalf("process read %d bytes (%v), want the %d answered", len(got), err, len(down))
			}
		})
	}
}

func TestEgressConnectionWaitsForAnAcceptThenCloses(t *testing.T) {
	const wait = 300 * time.Millisecond
	mod, addr := withEgress(t, wait)
	c, _ := start(t, mod)

	// A connection made before the host posts an accept is carried once
	// it does.
	early, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()
	early.Write([]byte("early"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	host, err := c.Egress(ctx)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(host, buf); err != nil || string(buf) != "early" {
		t.Fatalf("host read %q, %v", buf, err)
	}
	host.Close()

	// With no accept posted, a connection is closed once it has waited.
	begin := time.Now()
	lonely, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer lonely.Close()
	lonely.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := lonely.Read(buf)
	took := time.Since(begin)
	if n != 0 || !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("unaccepted connection: read %d, %v; want it closed", n, err)
	}
	if took < wait-50*time.Millisecond || took > wait+2*time.Second {
		t.Errorf("unaccepted connection closed after %v, want about %v", took, wait)
	}
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "reset")
}

func TestEgressQueueIsBounded(t *testing.T) {
	mod, addr := withEgress(t, time.Minute)
	c, _ := start(t, mod)
	waiting := make([]net.Conn, 256)
	for i := range waiting {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.Write([]byte{byte(i)})
		waiting[i] = conn
	}
	// The 257th is closed at once (well before the minute of waiting).
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := extra.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("257th connection: read %d, %v; want it closed at once", n, err)
	}
	// The first waits still, and is the first an accept takes.
	waiting[0].SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := waiting[0].Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("first waiting connection: %v, want it still open", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	host, err := c.Egress(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	b := make([]byte, 1)
	if _, err := io.ReadFull(host, b); err != nil || b[0] != 0 {
		t.Errorf("the first accept got connection %d (%v), want the oldest, 0", b[0], err)
	}
}

func TestEgressAcceptCanceled(t *testing.T) {
	mod, addr := withEgress(t, time.Minute)
	c, _ := start(t, mod)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.Egress(ctx)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("canceled accept: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a canceled accept did not return")
	}
	// The withdrawn accept takes nothing: the next connection waits for
	// the next accept.
	local, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	local.Write([]byte("x"))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	host, err := c.Egress(ctx2)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	if b, err := io.ReadAll(io.LimitReader(host, 1)); err != nil || string(b) != "x" {
		t.Errorf("next accept read %q, %v", b, err)
	}
}

func TestEgressRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t.Run("no listener", func(t *testing.T) {
		c, _ := start(t)
		if _, err := c.Egress(ctx); !errors.Is(err, guest.ErrService) {
			t.Errorf("egress without a listener: %v, want ErrService", err)
		}
	})
	t.Run("no upgrade", func(t *testing.T) {
		mod, _ := withEgress(t, time.Minute)
		c, _ := start(t, mod)
		resp, err := (&http.Client{Transport: c.Transport()}).Get("http://guest/egress")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET /egress without Upgrade: %d, want 400", resp.StatusCode)
		}
	})
	t.Run("tunnelled client", func(t *testing.T) {
		c := guest.NewWithTransport(http.DefaultTransport)
		if _, err := c.Egress(ctx); !errors.Is(err, guest.ErrNoDialer) {
			t.Errorf("egress through a transport: %v, want ErrNoDialer", err)
		}
		if err := guest.ServeEgress(ctx, c, 1, func(net.Conn) {}); !errors.Is(err, guest.ErrNoDialer) {
			t.Errorf("ServeEgress through a transport: %v, want ErrNoDialer", err)
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		addr, _ := serveTCP(t, "0123456789abcdef0123456789abcdef")
		c := guest.New(guest.TCPDialer(addr), "fedcba9876543210fedcba9876543210")
		defer c.Close()
		var ge *guest.Error
		if _, err := c.Egress(ctx); !errors.As(err, &ge) || ge.Code != guest.CodeUnauthorized {
			t.Errorf("egress with the wrong secret: %v, want unauthorized", err)
		}
	})
}

// selfSigned is a PEM certificate named cn.
func selfSigned(t *testing.T, cn string) []byte {
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

func TestSetEgressCA(t *testing.T) {
	dir := t.TempDir()
	system := selfSigned(t, "system root")
	sysPath := filepath.Join(dir, "system.crt")
	if err := os.WriteFile(sysPath, system, 0o644); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "home", ".agentbox", "ca.crt")
	c, _ := start(t, func(cfg *daemon.Config) { cfg.SystemCABundle, cfg.EgressCABundle = sysPath, bundle })
	ctx := context.Background()

	ca := selfSigned(t, "agentbox egress CA")
	path, err := c.SetEgressCA(ctx, ca)
	if err != nil || path != bundle {
		t.Fatalf("SetEgressCA: %q, %v", path, err)
	}
	got, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, append(bytes.Clone(system), ca...)) {
		t.Errorf("bundle is not the system roots followed by the CA:\n%s", got)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(got) {
		t.Error("the bundle does not parse")
	}

	for name, body := range map[string][]byte{
		"not PEM":     []byte("hello"),
		"a key":       pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("x")}),
		"bad DER":     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("x")}),
		"then junk":   append(bytes.Clone(ca), "junk"...),
		"nothing":     nil,
		"over 64 KiB": bytes.Repeat(ca, guest.MaxEgressCABytes/len(ca)+1),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := c.SetEgressCA(ctx, body); !errors.Is(err, guest.ErrBadRequest) && !errors.Is(err, guest.ErrTooLarge) {
				t.Errorf("SetEgressCA: %v, want a refusal", err)
			}
		})
	}
	// The guest caps the body itself, whatever the client checks.
	req, _ := http.NewRequest(http.MethodPut, "http://guest/egress/ca", bytes.NewReader(bytes.Repeat(ca, guest.MaxEgressCABytes/len(ca)+1)))
	resp, err := (&http.Client{Transport: c.Transport()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("PUT of an oversized CA: %d, want 413", resp.StatusCode)
	}
	if after, _ := os.ReadFile(bundle); !bytes.Equal(after, got) {
		t.Error("a refused CA changed the bundle")
	}
}
