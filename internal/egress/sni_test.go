package egress

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
)

// clientHello is the ClientHello crypto/tls sends for serverName.
func clientHello(t testing.TB, serverName string) []byte {
	a, b := net.Pipe()
	go func() {
		c := tls.Client(a, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == ""})
		c.Handshake()
		a.Close()
	}()
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(b, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(b, body); err != nil {
		t.Fatal(err)
	}
	b.Close()
	return append(hdr, body...)
}

func TestReadHello(t *testing.T) {
	for _, name := range []string{"example.com", "a.very.long.name.example.org", ""} {
		hello := clientHello(t, name)
		raw, sni, err := readHello(bytes.NewReader(append(hello, "after"...)))
		if err != nil || sni != name || !bytes.Equal(raw, hello) {
			t.Fatalf("%q: sni %q, err %v, %d of %d bytes", name, sni, err, len(raw), len(hello))
		}
	}
	// The same hello split over two records.
	hello := clientHello(t, "split.example")
	body := hello[5:]
	split := append([]byte{0x16, 3, 1, 0, 10}, body[:10]...)
	split = append(split, 0x16, 3, 1, byte((len(body)-10)>>8), byte(len(body)-10))
	split = append(split, body[10:]...)
	if raw, sni, err := readHello(bytes.NewReader(split)); err != nil || sni != "split.example" || !bytes.Equal(raw, split) {
		t.Fatalf("split: %q %v", sni, err)
	}
	// Every truncation fails cleanly; none panics.
	for i := range len(hello) {
		if _, _, err := readHello(bytes.NewReader(hello[:i])); err == nil {
			t.Fatalf("truncated at %d: no error", i)
		}
	}
	// A record over 16 KiB is refused unread.
	big := []byte{0x16, 3, 1, 0x40, 0x01}
	if _, _, err := readHello(bytes.NewReader(append(big, make([]byte, 1<<15)...))); !errors.Is(err, errNotHello) {
		t.Fatalf("big record: %v", err)
	}
}

func FuzzReadHello(f *testing.F) {
	f.Add(clientHello(f, "example.com"))
	f.Add([]byte{0x16, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		raw, _, _ := readHello(bytes.NewReader(b))
		if len(raw) > len(b) || len(raw) > maxHello+64 {
			t.Fatalf("read %d of %d bytes", len(raw), len(b))
		}
	})
}
