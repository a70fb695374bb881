package egress

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// stream is one connection the sandbox opened to the proxy, and the
// upstream connection it is being served by, if any.
type stream struct {
	p    *Proxy
	c    net.Conn
	tc   *touchConn
	head *headLimit
	br   *bufio.Reader
	w    *watch

	mu    sync.Mutex
	up    *upstream
	done  bool
	idled atomic.Bool
}

// idle closes s: nothing moved either way for Options.Idle.
func (s *stream) idle() {
	s.idled.Store(true)
	s.close()
}

// close ends the client connection and the upstream one.
func (s *stream) close() {
	s.mu.Lock()
	s.done = true
	up := s.up
	s.mu.Unlock()
	s.c.Close()
	if up != nil {
		up.Close()
	}
}

// setUpstream makes up s's upstream; false (and up closed) when s is
// already closed.
func (s *stream) setUpstream(up *upstream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		up.Close()
		return false
	}
	s.up = up
	return true
}

// dropUpstream closes s's upstream, to open another.
func (s *stream) dropUpstream() {
	s.mu.Lock()
	up := s.up
	s.up = nil
	s.mu.Unlock()
	if up != nil {
		up.Close()
	}
}

// client is the sandbox's side of s with what the proxy buffered of it
// still to read.
func (s *stream) client() net.Conn { return &bufConn{Conn: s.tc, r: s.br} }

type bufConn struct {
	net.Conn
	r io.Reader
}

func (c *bufConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// touchConn tells its watch of every byte either way.
type touchConn struct {
	net.Conn
	w *watch
}

func (c *touchConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.w.touch()
	}
	return n, err
}

func (c *touchConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.w.touch()
	}
	return n, err
}

// maxHead bounds a request's or response's header block.
const maxHead = 64 << 10

var errHeadTooLarge = errors.New("header block over 64 KiB")

// headLimit bounds what is read through it while n >= 0 (a header
// block's read); n < 0 is no bound.
type headLimit struct {
	r io.Reader
	n int64
	// over is what a read past the bound returns: nil for
	// errHeadTooLarge (the broker's relay wants io.EOF).
	over error
}

func (h *headLimit) Read(b []byte) (int, error) {
	if h.n < 0 {
		return h.r.Read(b)
	}
	if h.n == 0 {
		if h.over != nil {
			return 0, h.over
		}
		return 0, errHeadTooLarge
	}
	if int64(len(b)) > h.n {
		b = b[:h.n]
	}
	n, err := h.r.Read(b)
	h.n -= int64(n)
	return n, err
}

// watch calls its func once nothing touched it for d.
type watch struct {
	d    time.Duration
	last atomic.Int64
	t    *time.Timer
	f    func()
}

func newWatch(d time.Duration, f func()) *watch {
	w := &watch{d: d, f: f}
	w.touch()
	w.t = time.AfterFunc(d, w.check)
	return w
}

func (w *watch) touch() { w.last.Store(time.Now().UnixNano()) }

func (w *watch) check() {
	quiet := time.Since(time.Unix(0, w.last.Load()))
	if quiet >= w.d {
		w.f()
		return
	}
	w.t.Reset(w.d - quiet)
}

func (w *watch) stop() { w.t.Stop() }

// upstream is a connection to the outside: every byte is counted against
// the job's bound, the attempt's event and the metrics.
type upstream struct {
	net.Conn
	p    *Proxy
	a    atomic.Pointer[attempt]
	w    *watch
	host string
	port int
	addr netip.Addr
	// br and head read a plain HTTP upstream's responses.
	br   *bufio.Reader
	head *headLimit
}

func (u *upstream) Read(b []byte) (int, error) {
	b, err := u.p.budget(b)
	if err != nil {
		return 0, err
	}
	n, err := u.Conn.Read(b)
	if n > 0 {
		u.count(int64(n), 0)
	}
	return n, err
}

func (u *upstream) Write(b []byte) (int, error) {
	part, err := u.p.budget(b)
	if err != nil {
		return 0, err
	}
	n, err := u.Conn.Write(part)
	if n > 0 {
		u.count(0, int64(n))
	}
	if err == nil && len(part) < len(b) {
		u.p.exhaust()
		err = errBytes
	}
	return n, err
}

func (u *upstream) count(in, out int64) {
	u.w.touch()
	u.p.in.Add(in)
	u.p.out.Add(out)
	u.p.o.Metrics.bytes(in, out)
	if a := u.a.Load(); a != nil {
		a.in.Add(in)
		a.out.Add(out)
	}
}

// closeWrite half-closes c when it can, else closes it.
func closeWrite(c net.Conn) {
	for {
		switch x := c.(type) {
		case interface{ CloseWrite() error }:
			x.CloseWrite()
			return
		case *upstream:
			c = x.Conn
		case *bufConn:
			c = x.Conn
		case *touchConn:
			c = x.Conn
		default:
			c.Close()
			return
		}
	}
}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// pipe copies both ways between the client and up until both are done.
// One direction's error ends both; an error after the other direction
// ended cleanly (a client that cannot half-close) is no failure.
func pipe(client, up net.Conn) error {
	var clean atomic.Bool
	errs := make(chan error, 1)
	go func() { errs <- copyHalf(client, up, &clean) }()
	err := copyHalf(up, client, &clean)
	return errors.Join(err, <-errs)
}

// copyHalf copies src to dst, then half-closes dst; on an error it closes
// both.
func copyHalf(dst, src net.Conn, clean *atomic.Bool) error {
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	_, err := io.CopyBuffer(dst, src, *buf)
	if err != nil {
		dst.Close()
		src.Close()
		if clean.Load() && !errors.Is(err, errBytes) {
			return nil
		}
		return err
	}
	clean.Store(true)
	closeWrite(dst)
	return nil
}
