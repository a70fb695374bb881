package guest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ErrNoDialer means a client made by NewWithTransport (a cluster tunnel)
// was asked for a raw connection: egress needs a client with a Dialer.
var ErrNoDialer = errors.New("guest egress needs a direct dialer; this client reaches its guest through an HTTP transport")

// maxEgressAnswerBytes bounds what the host reads of the guest's answer to
// GET /egress before the connection is the process's: the headers, or an
// error's headers and body.
const maxEgressAnswerBytes = 64 << 10

// Egress posts one accept on the guest's egress listener: it opens a
// connection with the client's Dialer, asks GET /egress to be upgraded, and
// waits (until ctx ends) for a process in the sandbox to connect to
// 127.0.0.1:EgressPort. It returns the raw connection, which then carries
// that process's bytes both ways; closing it closes the process's
// connection, and it can be half-closed (CloseWrite) on every transport.
func (c *Client) Egress(ctx context.Context) (net.Conn, error) {
	if c.dial == nil {
		return nil, fmt.Errorf("guest egress: %w", ErrNoDialer)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("guest egress: %w", context.Cause(ctx))
	}
	conn, err := c.dial(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("guest egress: %w", context.Cause(ctx))
		}
		return nil, fmt.Errorf("%w: egress: %w", ErrUnavailable, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	rest, err := c.upgradeEgress(conn)
	if !stop() && ctx.Err() != nil {
		conn.Close()
		return nil, fmt.Errorf("guest egress: %w", context.Cause(ctx))
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	if len(rest) == 0 {
		return conn, nil // the transport's own type, so that copies can splice
	}
	return &replayConn{Conn: conn, pending: rest}, nil
}

// upgradeEgress sends GET /egress on conn and reads the guest's answer. It
// returns the bytes the guest sent after its 101 (the process's first
// bytes, read along with the headers).
func (c *Client) upgradeEgress(conn net.Conn) ([]byte, error) {
	req, err := http.NewRequest(http.MethodGet, "http://guest/egress", nil)
	if err != nil {
		return nil, fmt.Errorf("guest egress: %w", err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", EgressUpgrade)
	if c.secret != "" {
		req.Header.Set(SecretHeader, c.secret)
	}
	if err := req.Write(conn); err != nil {
		return nil, fmt.Errorf("%w: egress: %w", ErrUnavailable, err)
	}
	br := bufio.NewReader(&io.LimitedReader{R: conn, N: maxEgressAnswerBytes})
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, fmt.Errorf("%w: egress: %w", ErrUnavailable, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	if !strings.EqualFold(resp.Header.Get("Upgrade"), EgressUpgrade) {
		return nil, fmt.Errorf("%w: egress: upgraded to %.40q, not %s", ErrUnavailable, resp.Header.Get("Upgrade"), EgressUpgrade)
	}
	rest, _ := br.Peek(br.Buffered())
	return bytes.Clone(rest), nil
}

// replayConn reads pending before what is still to come on Conn.
type replayConn struct {
	net.Conn
	pending []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite ends the writing half where the transport can (every guest
// transport can), else closes the connection.
func (c *replayConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// The backoff of a posted accept after an error: doubled from the first
// to the last, reset by a connection handed over.
const (
	egressFirstBackoff = 10 * time.Millisecond
	egressMaxBackoff   = time.Second
)

// ServeEgress keeps idle accepts posted on the guest (Egress) until ctx
// ends: each connection one returns goes to handle, in a goroutine of its
// own, and another accept is posted at once. After an error (the guest
// restarting, gone, or not answering) an accept is posted again after a
// backoff that grows to one second; it gives up only when ctx ends. Once
// ctx is done it closes the accepts still waiting and the connections it
// handed out, waits for every handle to return, and returns nil. It fails
// at once only for a client without a Dialer (ErrNoDialer).
func ServeEgress(ctx context.Context, c *Client, idle int, handle func(net.Conn)) error {
	if c.dial == nil {
		return fmt.Errorf("guest egress: %w", ErrNoDialer)
	}
	var handed connSet
	var handlers, slots sync.WaitGroup
	start := func(conn net.Conn) {
		handed.add(conn)
		handlers.Add(1)
		go func() {
			defer handlers.Done()
			defer handed.remove(conn)
			handle(conn)
		}()
	}
	for range max(idle, 1) {
		slots.Add(1)
		go func() {
			defer slots.Done()
			postAccepts(ctx, c, start)
		}()
	}
	slots.Wait()
	handed.closeAll()
	handlers.Wait()
	return nil
}

// postAccepts keeps one accept posted until ctx ends.
func postAccepts(ctx context.Context, c *Client, start func(net.Conn)) {
	var backoff time.Duration
	for {
		conn, err := c.Egress(ctx)
		if ctx.Err() != nil {
			if err == nil {
				start(conn) // ServeEgress closes it with the others
			}
			return
		}
		if err != nil {
			backoff = min(max(2*backoff, egressFirstBackoff), egressMaxBackoff)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		backoff = 0
		start(conn)
	}
}

// connSet is the connections ServeEgress handed out and still owns.
type connSet struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (s *connSet) add(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
	}
	s.conns[c] = struct{}{}
}

func (s *connSet) remove(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

func (s *connSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

// SetEgressCA makes the sandbox trust the egress proxy's certificate
// authority: the guest writes the image's system roots followed by pem (at
// most MaxEgressCABytes, CERTIFICATE blocks only) to EgressCABundle,
// atomically, and the path it wrote is returned.
func (c *Client) SetEgressCA(ctx context.Context, pem []byte) (string, error) {
	if len(pem) > MaxEgressCABytes {
		return "", fmt.Errorf("%w: egress CA of %d bytes, over %d", ErrTooLarge, len(pem), MaxEgressCABytes)
	}
	var out EgressCA
	if err := c.doJSON(ctx, http.MethodPut, "/egress/ca", nil, bytes.NewReader(pem), &out); err != nil {
		return "", err
	}
	return out.Path, nil
}
