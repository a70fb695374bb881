package guest_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
)

// TestServeEgressBacksOff: with the guest gone, the accepts are posted
// again after a growing backoff, not in a hot loop, until ctx ends.
func TestServeEgressBacksOff(t *testing.T) {
	var dials atomic.Int64
	c := guest.New(func(context.Context) (net.Conn, error) {
		dials.Add(1)
		return nil, errors.New("no such sandbox")
	}, "")
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	begin := time.Now()
	if err := guest.ServeEgress(ctx, c, 4, func(net.Conn) { t.Error("handed a connection") }); err != nil {
		t.Fatalf("ServeEgress: %v", err)
	}
	if took := time.Since(begin); took > 3*time.Second {
		t.Errorf("ServeEgress returned %v after its context ended", took-1500*time.Millisecond)
	}
	// Each of 4 accepts: after 10, 20, 40, ... 640 ms, at most 8 tries in
	// 1.5 s; a hot loop makes thousands.
	if n := dials.Load(); n < 8 || n > 4*9 {
		t.Errorf("%d dials in 1.5 s by 4 accepts, want a few per accept", n)
	}
}

// fakeGuest answers every connection's first request with answer, then
// writes more.
func fakeGuest(t *testing.T, answer, more string) *guest.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "g.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				req, err := http.ReadRequest(bufio.NewReader(conn))
				if err != nil || req.Header.Get("Upgrade") != guest.EgressUpgrade {
					return
				}
				io.WriteString(conn, answer)
				io.WriteString(conn, more)
			}()
		}
	}()
	return guest.NewClient(sock)
}

func TestEgressReplaysBytesReadWithTheAnswer(t *testing.T) {
	c := fakeGuest(t, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+guest.EgressUpgrade+"\r\n\r\nfirst bytes;", " then more")
	conn, err := c.Egress(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got, err := io.ReadAll(conn)
	if err != nil || string(got) != "first bytes; then more" {
		t.Errorf("read %q, %v", got, err)
	}
}

func TestEgressAnswerIsCapped(t *testing.T) {
	c := fakeGuest(t, "HTTP/1.1 101 Switching Protocols\r\nX-Flood: "+strings.Repeat("a", 1<<20), "\r\n\r\n")
	if _, err := c.Egress(context.Background()); !errors.Is(err, guest.ErrUnavailable) {
		t.Errorf("an answer with 1 MiB of headers: %v, want ErrUnavailable", err)
	}
	c = fakeGuest(t, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "")
	if _, err := c.Egress(context.Background()); !errors.Is(err, guest.ErrUnavailable) {
		t.Errorf("a 200 to an upgrade: %v, want ErrUnavailable", err)
	}
}
