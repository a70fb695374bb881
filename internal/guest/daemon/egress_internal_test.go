package daemon

import (
	"context"
	"errors"
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

// TestEgressQueueBoundsLiveConnections: the guest holds at most
// maxEgressLive local connections, waiting or taken by the host's
// accepts; one more is closed at once, and a place comes back when one
// held is closed. A process keeping hundreds of connections open cannot
// take every descriptor of the daemon's.
func TestEgressQueueBoundsLiveConnections(t *testing.T) {
	q := &egressQueue{wait: time.Minute}
	defer q.close()
	var held []net.Conn
	offer := func() net.Conn {
		local, remote := net.Pipe()
		t.Cleanup(func() { local.Close(); remote.Close() })
		q.offer(remote)
		return local
	}
	for range maxEgressLive {
		offer()
		c, err := q.take(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c) // relayed: no longer waiting, still held
	}
	closedAtOnce := func(local net.Conn) bool {
		local.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := local.Read(make([]byte, 1))
		return errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe)
	}
	if !closedAtOnce(offer()) {
		t.Fatalf("connection %d not closed at once", maxEgressLive+1)
	}
	held[0].Close()
	extra := offer()
	c, err := q.take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Write([]byte("x"))
	extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); err != nil {
		t.Fatalf("after one closed, a new connection was not taken: %v", err)
	}
	for _, c := range held[1:] {
		c.Close()
	}
	if n := q.live.Load(); n != 1 {
		t.Fatalf("%d live after closing all but one", n)
	}
}
