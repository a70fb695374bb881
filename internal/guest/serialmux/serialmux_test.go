package serialmux

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/yamux"
)

// guestEnd plays the guest on one end of a pipe: Hello, then streams that
// echo what they read, upper-cased.
func guestEnd(t *testing.T, c net.Conn) {
	t.Helper()
	go func() {
		if _, err := io.WriteString(c, Hello); err != nil {
			return
		}
		s, err := yamux.Server(c, config())
		if err != nil {
			return
		}
		for {
			st, err := s.Accept()
			if err != nil {
				return
			}
			go func() {
				defer st.Close()
				b, _ := io.ReadAll(st)
				_, _ = io.WriteString(st, strings.ToUpper(string(b)))
			}()
		}
	}()
}

func TestManyStreamsOverOnePort(t *testing.T) {
	host, guest := net.Pipe()
	guestEnd(t, guest)
	s, err := Connect(context.Background(), host)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			c, err := s.Dial(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			msg := fmt.Sprintf("stream %d %s", i, strings.Repeat("x", 100_000))
			go func() {
				_, _ = io.WriteString(c, msg)
				// The half-close every guest transport has: the peer reads
				// EOF and still answers.
				_ = c.(interface{ CloseWrite() error }).CloseWrite()
			}()
			got, err := io.ReadAll(c)
			if err != nil || string(got) != strings.ToUpper(msg) {
				t.Errorf("stream %d: %d bytes back, %v", i, len(got), err)
			}
		})
	}
	wg.Wait()
	guest.Close()
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Error("the session did not end when the guest went away")
	}
}

func TestConnectRefusesAStranger(t *testing.T) {
	host, guest := net.Pipe()
	go func() { _, _ = io.WriteString(guest, strings.Repeat("?", len(Hello))) }()
	if _, err := Connect(context.Background(), host); err == nil || !strings.Contains(err.Error(), "guest said") {
		t.Errorf("err = %v, want the guest's words quoted", err)
	}
}

func TestConnectGivesUpWithItsContext(t *testing.T) {
	host, _ := net.Pipe() // a guest that never speaks
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := Connect(ctx, host); err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("err = %v after %v", err, time.Since(start))
	}
}

// TestGuestOpenedStreamsAreRefused: the host accepts no stream; a guest
// opening many, and writing into each, gets them reset past the first,
// so what it can park in the host's memory is one stream's window.
func TestGuestOpenedStreamsAreRefused(t *testing.T) {
	host, guest := net.Pipe()
	defer host.Close()
	seen := make(chan error, 1)
	go func() {
		io.WriteString(guest, Hello)
		g, err := yamux.Server(guest, config())
		if err != nil {
			seen <- err
			return
		}
		for range 50 {
			st, err := g.Open()
			if err != nil {
				seen <- err
				return
			}
			go st.Write(make([]byte, 64<<10))
		}
		// The host reads frames in order: its answer to a ping means it
		// has handled the 50 opens before it.
		_, err = g.Ping()
		seen <- err
	}()
	s, err := Connect(context.Background(), host)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := <-seen; err != nil {
		t.Fatal(err)
	}
	if n := s.s.NumStreams(); n > 1 {
		t.Errorf("the host holds %d streams the guest opened, want at most 1", n)
	}
}
