// Package connlimit bounds the connections a listener hands to a server:
// how many one client address may hold at once, and how many all clients
// may. A connection over a bound never reaches the server: it is answered
// 503 once its request's headers are in (a second at most; clients such as
// Go's read nothing sent before their request), and closed; past
// maxRefusing such answers at once, it is closed at once. A flood costs
// the host a bounded number of file descriptors and goroutines.
//
// Each write on an admitted connection must make progress within the
// write timeout: a client that stops reading (its receive window full)
// would otherwise hold its place forever, since the server has no
// WriteTimeout for its streams' sake. The write fails, the server closes
// the connection and its place is free.
package connlimit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Config is a Listener's bounds.
type Config struct {
	// PerAddr bounds the connections of one client address (an IPv6
	// address counted by its /64, which one host usually holds whole);
	// 0 for no bound.
	PerAddr int
	// Total bounds the connections of all clients; 0 for no bound.
	Total int
	// WriteTimeout bounds how long a write of an admitted connection may
	// wait for the client to read some of it (the kernel wakes a writer
	// once half of a full send buffer is read); 0 for no bound. A
	// deadline of the server's own that comes sooner still applies.
	WriteTimeout time.Duration
	// Log gets a warning, at most once a minute, while connections are
	// refused; nil for none.
	Log *slog.Logger
}

// Listener is a net.Listener that refuses the connections over its
// bounds. Its connections free their place when closed, hijacked ones
// included.
type Listener struct {
	net.Listener
	cfg     Config
	mu      sync.Mutex
	perAddr map[string]int
	total   int
	refused atomic.Int64 // since the last warning
	warned  atomic.Int64 // unix nanoseconds of the last warning
	// refusing counts the refusals under way, wg waits for them.
	refusing atomic.Int64
	wg       sync.WaitGroup
}

// maxRefusing bounds the refused connections answered at once; each holds
// a goroutine and a file for a second at most.
const maxRefusing = 64

// Close closes the listener, and waits for the refusals under way.
func (l *Listener) Close() error {
	err := l.Listener.Close()
	l.wg.Wait()
	return err
}

// New wraps l.
func New(l net.Listener, cfg Config) *Listener {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Listener{Listener: l, cfg: cfg, perAddr: map[string]int{}}
}

// Accept returns the next connection within the bounds; those over them
// are refused on the way.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := addrKey(c.RemoteAddr())
		if why := l.admit(key); why != "" {
			l.refuse(c, why)
			continue
		}
		return &conn{Conn: c, release: func() { l.release(key) }, timeout: l.cfg.WriteTimeout}, nil
	}
}

// admit takes a place for a connection from key, or says why there is none.
func (l *Listener) admit(key string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.cfg.Total > 0 && l.total >= l.cfg.Total:
		return fmt.Sprintf("the server holds as many connections as it takes (%d)", l.cfg.Total)
	case l.cfg.PerAddr > 0 && l.perAddr[key] >= l.cfg.PerAddr:
		return fmt.Sprintf("your address holds as many connections as one may (%d); close some", l.cfg.PerAddr)
	}
	l.total++
	l.perAddr[key]++
	return ""
}

// release gives back the place of a connection from key.
func (l *Listener) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.perAddr[key]--; l.perAddr[key] <= 0 {
		delete(l.perAddr, key)
	}
}

// Conns is how many connections are open, from all addresses and from
// addr's.
func (l *Listener) Conns(addr net.Addr) (total, fromAddr int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.perAddr[addrKey(addr)]
}

// refuse answers c 503 and closes it, or only closes it when maxRefusing
// answers are under way.
func (l *Listener) refuse(c net.Conn, why string) {
	l.warn(c.RemoteAddr(), why)
	if l.refusing.Add(1) > maxRefusing {
		l.refusing.Add(-1)
		_ = c.Close()
		return
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer l.refusing.Add(-1)
		answer(c, why)
	}()
}

// answer waits a second at most for the headers of c's request (4 KiB of
// them at most), answers 503 and closes c.
func answer(c net.Conn, why string) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	head := make([]byte, 0, 4<<10)
	for len(head) < cap(head) && !bytes.Contains(head, []byte("\r\n\r\n")) {
		n, err := c.Read(head[len(head):cap(head)])
		head = head[:len(head)+n]
		if err != nil {
			break
		}
	}
	body := fmt.Sprintf(`{"error":{"code":"unavailable","message":"too many connections: %s"}}`, why)
	_ = c.SetWriteDeadline(time.Now().Add(time.Second)) // it fits a fresh socket's buffer; in case it would not
	_, _ = io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"+
		"Connection: close\r\nContent-Length: "+fmt.Sprint(len(body))+"\r\n\r\n"+body)
}

// warn logs refusals at most once a minute, with how many there were.
func (l *Listener) warn(addr net.Addr, why string) {
	n := l.refused.Add(1)
	now := time.Now().UnixNano()
	last := l.warned.Load()
	if now-last < int64(time.Minute) || !l.warned.CompareAndSwap(last, now) {
		return
	}
	l.refused.Add(-n)
	l.cfg.Log.Warn("http: refusing connections over the bounds (AGENTBOX_HTTP_MAX_CONNS_PER_ADDR, AGENTBOX_HTTP_MAX_CONNS)",
		"refused", n, "last_from", addr.String(), "why", why)
}

// addrKey is what connections are counted by: the IP address, or an IPv6
// address's /64.
func addrKey(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	if ip4 := ta.IP.To4(); ip4 != nil {
		return ip4.String()
	}
	return ta.IP.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// conn is an admitted connection; closing it frees its place, once. Its
// writes each get a deadline timeout from their start, or the one set
// with SetWriteDeadline if sooner.
type conn struct {
	net.Conn
	once    sync.Once
	release func()
	timeout time.Duration
	// set is the write deadline set by the server or a handler, in unix
	// nanoseconds; 0 for none.
	set atomic.Int64
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// Write writes p, each wait for the client to read within the write
// timeout: a client that takes some of p within it gets another.
func (c *conn) Write(p []byte) (int, error) {
	if c.timeout <= 0 {
		return c.Conn.Write(p)
	}
	n := 0
	for {
		if err := c.Conn.SetWriteDeadline(c.deadline()); err != nil {
			return n, err
		}
		m, err := c.Conn.Write(p[n:])
		n += m
		if err == nil || !c.progressed(m, err) {
			return n, err
		}
	}
}

// ReadFrom keeps the sendfile path of the connection under it for the
// server's file responses, each wait for the client to read within the
// write timeout as Write's; other readers are copied through Write.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if c.timeout <= 0 {
		return io.Copy(c.Conn, r)
	}
	if !isFile(r) {
		return io.Copy(struct{ io.Writer }{c}, r)
	}
	var n int64
	for {
		if err := c.Conn.SetWriteDeadline(c.deadline()); err != nil {
			return n, err
		}
		m, err := io.Copy(c.Conn, r) // sendfile: the file's offset moves by what was sent
		n += m
		if err == nil || !c.progressed(int(min(m, 1)), err) {
			return n, err
		}
	}
}

// isFile is whether r is a file, or a limited one, which sendfile copies
// from, leaving nothing read and unsent when it stops.
func isFile(r io.Reader) bool {
	if lr, ok := r.(*io.LimitedReader); ok {
		r = lr.R
	}
	_, ok := r.(*os.File)
	return ok
}

// progressed is whether a write that sent m bytes before it failed with
// err may go on: it timed out on the write timeout, not on a deadline the
// server set, after the client took some.
func (c *conn) progressed(m int, err error) bool {
	if m == 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	set := c.set.Load()
	return set == 0 || set > time.Now().UnixNano()
}

// SetWriteDeadline sets the deadline of the writes to come, which still
// get the write timeout if sooner, and of any under way, which keeps it.
func (c *conn) SetWriteDeadline(t time.Time) error {
	c.storeSet(t)
	if c.timeout <= 0 {
		return c.Conn.SetWriteDeadline(t)
	}
	return c.Conn.SetWriteDeadline(c.deadline())
}

// SetDeadline sets the read deadline as net.Conn's does, and the write
// deadline as SetWriteDeadline.
func (c *conn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

func (c *conn) storeSet(t time.Time) {
	if t.IsZero() {
		c.set.Store(0)
		return
	}
	c.set.Store(max(t.UnixNano(), 1))
}

// deadline is a write's deadline from now: the write timeout's, or the
// one set if sooner.
func (c *conn) deadline() time.Time {
	d := time.Now().Add(c.timeout)
	if set := c.set.Load(); set != 0 && set < d.UnixNano() {
		return time.Unix(0, set)
	}
	return d
}

// CloseWrite lets the server half-close the connection as it would the
// TCP connection under it.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
