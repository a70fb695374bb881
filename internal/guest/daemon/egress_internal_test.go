package daemon

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// serveAt serves a guest with an egress listener on the unix socket sock
// until the returned stop is called.
func serveAt(t *testing.T, sock string) (srv *Server, egressAddr string, stop func()) {
	t.Helper()
	el, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err = New(Config{Workspace: t.TempDir(), Egress: el, EgressWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	return srv, el.Addr().String(), func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
}

// postedAccepts is how many of the host's accepts the guest holds.
func (s *Server) postedAccepts() int {
	s.egress.mu.Lock()
	defer s.egress.mu.Unlock()
	return len(s.egress.accepts)
}

func TestServeEgressKeepsAcceptsPostedAcrossARestart(t *testing.T) {
	dir, err := os.MkdirTemp("", "abe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, guest.SocketName)
	srv, addr, stop := serveAt(t, sock)

	c := guest.NewClient(sock)
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	handled := make(chan net.Conn, 8)
	served := make(chan error, 1)
	go func() {
		served <- guest.ServeEgress(ctx, c, 4, func(conn net.Conn) {
			handled <- conn
			io.Copy(io.Discard, conn) // held until ServeEgress closes it
		})
	}()
	testenv.Await(t, 10*time.Second, "4 accepts posted", func() bool { return srv.postedAccepts() == 4 })

	// A connection takes one accept; another is posted in its place.
	local, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	first := <-handled
	testenv.Await(t, 10*time.Second, "the taken accept replaced", func() bool { return srv.postedAccepts() == 4 })

	// The guest restarts (the relay under way is cut); the host posts
	// its accepts on the new one.
	stop()
	srv, addr, stop = serveAt(t, sock)
	defer func() { stop() }()
	testenv.Await(t, 10*time.Second, "4 accepts posted on the restarted guest", func() bool { return srv.postedAccepts() == 4 })
	again, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	second := <-handled

	// Once ctx ends, ServeEgress closes what it handed out and returns.
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("ServeEgress: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeEgress did not return after its context ended")
	}
	for _, conn := range []net.Conn{first, second} {
		if _, err := conn.Write([]byte("x")); err == nil {
			t.Errorf("a connection ServeEgress handed out is still open after it returned")
		}
	}
	testenv.Await(t, 10*time.Second, "the host's accepts withdrawn", func() bool { return srv.postedAccepts() == 0 })
}
