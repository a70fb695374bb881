package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox/agentbox/internal/guest"
)

// The sandbox's way out. Its processes connect to the egress listener on
// loopback (guest.EgressPort); the host posts accepts (GET /egress, held
// open until a process connects); the guest pairs the two and relays bytes
// both ways. No policy here: the host's proxy decides what passes.

// maxEgressWaiting is how many local connections may wait for an accept
// from the host at once; one more is closed at once.
const maxEgressWaiting = 256

// maxEgressLive bounds the local connections the guest holds at once,
// waiting or relayed; one more is closed at once. A relay costs the
// daemon two descriptors, and lasts until the process closes its end (a
// half-close from the host leaves it open): without a bound, a process
// holding 150 connections took every descriptor of the daemon's
// (RLIMIT_NOFILE, 1024 by default; a relay spliced cost six) and the host
// could no longer reach it, so the sandbox was removed as unresponsive.
const maxEgressLive = 320

// defaultEgressWait is how long a local connection waits for an accept
// before it is closed: a process whose sandbox gets no network (the host
// posts no accepts) sees its connection closed soon, not hang.
const defaultEgressWait = 10 * time.Second

// ListenEgress opens the egress listener on the sandbox's loopback,
// 127.0.0.1:guest.EgressPort.
func ListenEgress() (net.Listener, error) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(guest.EgressPort)))
	if err != nil {
		return nil, fmt.Errorf("guest: egress listener: %w", err)
	}
	return l, nil
}

// errEgressClosed answers accepts posted while the daemon shuts down.
var errEgressClosed = errors.New("the guest is shutting down")

// egressQueue pairs local connections with the host's accepts, whichever
// comes first waiting for the other. Local connections wait at most wait,
// at most maxEgressWaiting of them; no goroutine waits for one.
type egressQueue struct {
	wait    time.Duration
	live    atomic.Int64 // local connections held, waiting or relayed
	mu      sync.Mutex
	closed  bool
	conns   []*waitingConn  // oldest first
	accepts []chan net.Conn // the host's accepts waiting, oldest first; each buffered 1
}

// waitingConn is a local connection no accept has taken yet; timer closes
// it when it has waited too long.
type waitingConn struct {
	conn  net.Conn
	timer *time.Timer
}

// offer hands a new local connection to the oldest waiting accept, or
// queues it; with the queue full it is closed at once.
func (q *egressQueue) offer(c net.Conn) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || len(q.accepts) == 0 && len(q.conns) >= maxEgressWaiting || q.live.Load() >= maxEgressLive {
		c.Close()
		return
	}
	q.live.Add(1)
	q.putLocked(&egressConn{Conn: c, q: q}, false)
}

// egressConn is a local connection the queue counts: closing it gives
// its place back. It hides the TCP connection's ReadFrom and WriteTo on
// purpose: their splice holds a pipe (two descriptors) per direction for
// as long as a relay waits, which tripled a relay's cost in descriptors.
type egressConn struct {
	net.Conn
	q    *egressQueue
	once sync.Once
}

func (c *egressConn) Close() error {
	c.once.Do(func() { c.q.live.Add(-1) })
	return c.Conn.Close()
}

// CloseWrite half-closes the connection, as the relay passes on an end.
func (c *egressConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// giveBack returns a connection an accept took but could not use (its
// host went away) to the front of the queue.
func (q *egressQueue) giveBack(c net.Conn) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		c.Close()
		return
	}
	q.putLocked(c, true)
}

func (q *egressQueue) putLocked(c net.Conn, front bool) {
	if len(q.accepts) > 0 {
		ch := q.accepts[0]
		q.accepts = q.accepts[1:]
		ch <- c
		return
	}
	w := &waitingConn{conn: c}
	w.timer = time.AfterFunc(q.wait, func() { q.expire(w) })
	if front {
		q.conns = slices.Insert(q.conns, 0, w)
	} else {
		q.conns = append(q.conns, w)
	}
}

// expire closes w if no accept has taken it meanwhile.
func (q *egressQueue) expire(w *waitingConn) {
	q.mu.Lock()
	i := slices.Index(q.conns, w)
	if i >= 0 {
		q.conns = slices.Delete(q.conns, i, i+1)
	}
	q.mu.Unlock()
	if i >= 0 {
		w.conn.Close()
	}
}

// take waits until ctx ends for a local connection.
func (q *egressQueue) take(ctx context.Context) (net.Conn, error) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil, errEgressClosed
	}
	if len(q.conns) > 0 {
		w := q.conns[0]
		q.conns = q.conns[1:]
		q.mu.Unlock()
		w.timer.Stop() // if it fires meanwhile, expire finds w gone
		return w.conn, nil
	}
	ch := make(chan net.Conn, 1)
	q.accepts = append(q.accepts, ch)
	q.mu.Unlock()
	select {
	case c, ok := <-ch:
		if !ok {
			return nil, errEgressClosed
		}
		return c, nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	i := slices.Index(q.accepts, ch)
	if i >= 0 {
		q.accepts = slices.Delete(q.accepts, i, i+1)
	}
	q.mu.Unlock()
	if i < 0 { // a connection was handed over (or the queue closed) meanwhile
		if c, ok := <-ch; ok {
			q.giveBack(c)
		}
	}
	return nil, context.Cause(ctx)
}

// close closes every waiting connection and ends every waiting accept;
// later ones are refused.
func (q *egressQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, w := range q.conns {
		w.timer.Stop()
		w.conn.Close()
	}
	for _, ch := range q.accepts {
		close(ch)
	}
	q.conns, q.accepts = nil, nil
}

// acceptEgress offers every connection made to l until l is closed.
func (s *Server) acceptEgress(l net.Listener) {
	var delay time.Duration
	for {
		c, err := l.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil { // out of descriptors, say: wait rather than spin
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			if delay == time.Second {
				s.log.Warn("egress accept", "err", err)
			}
			time.Sleep(delay)
			continue
		}
		delay = 0
		s.egress.offer(c)
	}
}

// startEgress starts relaying the egress listener, if the daemon has one.
func (s *Server) startEgress() {
	if s.cfg.Egress == nil {
		return
	}
	s.egressLoop.Add(1)
	go func() {
		defer s.egressLoop.Done()
		s.acceptEgress(s.cfg.Egress)
	}()
}

// stopEgress closes the listener and every waiting connection and accept.
// The relays under way are upgraded connections (closeUpgraded ends them).
func (s *Server) stopEgress() {
	if s.cfg.Egress != nil {
		s.cfg.Egress.Close()
	}
	s.egressLoop.Wait()
	s.egress.close()
}

// switchingProtocols is the guest's answer to an accept it pairs.
const switchingProtocols = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + guest.EgressUpgrade + "\r\n\r\n"

// egressAccept serves GET /egress: it waits, until the host's request
// ends, for a process to connect to the egress listener, then answers 101
// and relays that connection over this one.
func (s *Server) egressAccept(w http.ResponseWriter, r *http.Request) {
	if !hasToken(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), guest.EgressUpgrade) {
		s.writeError(w, guest.Errorf(guest.CodeBadRequest, "GET /egress needs Connection: Upgrade and Upgrade: %s", guest.EgressUpgrade))
		return
	}
	if s.cfg.Egress == nil {
		s.writeError(w, guest.Errorf(guest.CodeService, "this guest has no egress listener"))
		return
	}
	s.proxies.Add(1)
	defer s.proxies.Done()
	local, err := s.egress.take(r.Context())
	if err != nil {
		if r.Context().Err() == nil {
			s.writeError(w, guest.Errorf(guest.CodeService, "egress: %v", err))
		}
		return
	}
	host, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		s.egress.giveBack(local)
		return
	}
	_, err = rw.WriteString(switchingProtocols)
	if err == nil {
		err = rw.Flush()
	}
	if err != nil {
		host.Close()
		s.egress.giveBack(local)
		return
	}
	var from io.Reader = host
	if n := rw.Reader.Buffered(); n > 0 { // the host wrote before it read the 101
		b, _ := rw.Reader.Peek(n)
		from = io.MultiReader(bytes.NewReader(bytes.Clone(b)), host)
	}
	s.relay(host, from, local)
}

// hasToken reports whether the comma-separated header name lists token.
func hasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// relay copies bytes both ways between the host's connection (read
// through from) and the local one until both directions have ended. The
// end of one direction is passed on as a half-close; an error in either
// closes both.
func (s *Server) relay(host net.Conn, from io.Reader, local net.Conn) {
	s.trackUpgraded(host, local)
	defer s.untrackUpgraded(host, local)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(local, from, host)
	}()
	pipe(host, local, local)
	<-done
	host.Close()
	local.Close()
}

// pipe copies src into dst, then half-closes dst; if the copy fails both
// are closed, which ends the other direction too.
func pipe(dst net.Conn, src io.Reader, srcConn net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		srcConn.Close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); !ok || cw.CloseWrite() != nil {
		dst.Close()
	}
}

// trackUpgraded records connections Serve must close at shutdown, or
// closes them if it has already closed the others.
func (s *Server) trackUpgraded(cs ...net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		if s.upgradedClosed {
			c.Close()
			continue
		}
		s.upgraded[c] = struct{}{}
	}
}

func (s *Server) untrackUpgraded(cs ...net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cs {
		delete(s.upgraded, c)
	}
}
