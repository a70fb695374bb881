package egress

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// retryServer is a TLS server that answers a ClientHello offering only an
// X25519 key share with a HelloRetryRequest (it takes P-256 only).
func retryServer(t *testing.T) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(hello))
	srv.TLS = &tls.Config{CurvePreferences: []tls.CurveID{tls.CurveP256}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

var retryCurves = []tls.CurveID{tls.X25519, tls.CurveP256}

// retryHello is the first TLS record a Go client sends for name, with
// curves that make retryServer ask again.
func retryHello(t *testing.T, name string) []byte {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go tls.Client(a, &tls.Config{ServerName: name, CurvePreferences: retryCurves, MinVersion: tls.VersionTLS13}).Handshake()
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(b, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(b, body); err != nil {
		t.Fatal(err)
	}
	return append(hdr, body...)
}

// TestHelloRetryAllowed: a client sent a HelloRetryRequest gets through
// with its second ClientHello for the same name.
func TestHelloRetryAllowed(t *testing.T) {
	srv := retryServer(t)
	p := port(t, srv)
	h := newHarness(t, policy(t, `{"allow": ["example.com:`+p+`"]}`), Options{})
	c := h.client(srv)
	c.Transport.(*http.Transport).TLSClientConfig.CurvePreferences = retryCurves
	if status, body, _ := get(t, c, "GET", "https://example.com:"+p+"/"); status != 200 || body != "hello GET" {
		t.Fatalf("got %d %q", status, body)
	}
	if ev := h.exactly(1)[0]; ev.Decision != "allow" || ev.Error != "" {
		t.Fatalf("event %+v", ev)
	}
}

// TestHelloRetryOtherName: after the server's HelloRetryRequest, a second
// ClientHello naming another host is refused as the first would be.
func TestHelloRetryOtherName(t *testing.T) {
	srv := retryServer(t)
	p := port(t, srv)
	h := newHarness(t, policy(t, `{"allow": ["example.com:`+p+`"]}`), Options{})
	c, err := net.Dial("tcp", h.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT example.com:%s HTTP/1.1\r\nHost: x\r\n\r\n", p)
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	c.Write(retryHello(t, "example.com"))
	hdr := make([]byte, 5+4+2+32)
	if _, err := io.ReadFull(br, hdr); err != nil || hdr[0] != 0x16 || hdr[5] != 2 || string(hdr[11:]) != string(helloRetryRandom) {
		t.Fatalf("the server's first message is no HelloRetryRequest: %x %v", hdr, err)
	}
	c.Write([]byte{0x14, 3, 3, 0, 1, 1}) // change_cipher_spec, as clients send
	c.Write(retryHello(t, "evil.test"))
	io.Copy(io.Discard, br)
	ev := h.exactly(1)[0]
	if ev.Decision != "deny" || !strings.Contains(ev.Reason, "TLS server name evil.test (second ClientHello) differs") {
		t.Fatalf("event %+v", ev)
	}
}
