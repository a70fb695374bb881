package jupyter

// The notebook server's wire: its REST API for kernels and the WebSocket
// through which it relays a kernel's Jupyter messages (messaging protocol
// v5, as JSON). The server runs inside the sandbox on the loopback
// interface; everything it sends is as untrusted as the kernel's code.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"golang.org/x/sys/unix"
)

// errKernelGone means the notebook server does not know the kernel (it was
// shut down, or the server restarted).
var errKernelGone = errors.New("kernel not found")

// jupyterReadLimit caps one message from the server; a bigger one breaks the
// connection (an image's base64 is within it).
const jupyterReadLimit = 64 << 20

// jupyterCallTimeout bounds one REST call; shutting a kernel down waits up
// to 5 s for it to exit.
const jupyterCallTimeout = 30 * time.Second

// jupyter is a client of the notebook server's kernel API.
type jupyter struct {
	base string // ends in "/"
	http *http.Client
	// up has the server started if it is not running.
	up func(context.Context) error
}

// jupyterXSRF passes the server's cross-site check: with authentication off
// it still wants the _xsrf cookie echoed in a header, and accepts any value.
const jupyterXSRF = "agentbox"

func newJupyterClient() *http.Client {
	// No proxy: the server is on the loopback interface, whatever the
	// sandbox's environment says.
	return &http.Client{Transport: &http.Transport{
		Proxy: nil, MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute, DialContext: dialQuickAck,
	}}
}

// dialQuickAck dials a connection that acknowledges what it receives at
// once. The notebook server writes a kernel's messages to the WebSocket one
// by one with Nagle's algorithm on, so each small message after the first
// waits for the previous one's ACK, which Linux delays by up to 40 ms: an
// execution's round trip took 50 ms where the kernel needs 6.
func dialQuickAck(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c, nil
	}
	return &quickAckConn{TCPConn: tc, raw: raw}, nil
}

// quickAckConn turns delayed ACKs off again after every read: Linux turns
// them back on by itself.
type quickAckConn struct {
	*net.TCPConn
	raw syscall.RawConn
}

func (c *quickAckConn) Read(p []byte) (int, error) {
	n, err := c.TCPConn.Read(p)
	_ = c.raw.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
	})
	return n, err
}

// kernelModel is the server's description of a kernel.
type kernelModel struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	ExecutionState string `json:"execution_state"`
}

// call sends a REST request and decodes a JSON answer into out (if not nil).
func (j jupyter) call(ctx context.Context, method, path string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, jupyterCallTimeout)
	defer cancel()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, j.base+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-XSRFToken", jupyterXSRF)
	req.AddCookie(&http.Cookie{Name: "_xsrf", Value: jupyterXSRF})
	resp, err := j.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case err != nil:
		return err
	case resp.StatusCode == http.StatusNotFound:
		return errKernelGone
	case resp.StatusCode >= 300:
		return fmt.Errorf("%s %s: %s: %.200s", method, path, resp.Status, data)
	case out == nil:
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: bad answer: %w", method, path, err)
	}
	return nil
}

// start starts a python3 kernel and returns its id.
func (j jupyter) start(ctx context.Context) (string, error) {
	var m kernelModel
	if err := j.call(ctx, http.MethodPost, "api/kernels", map[string]string{"name": "python3"}, &m); err != nil {
		return "", fmt.Errorf("start kernel: %w", err)
	}
	if m.ID == "" {
		return "", errors.New("start kernel: no id in the answer")
	}
	return m.ID, nil
}

// state returns the kernel's execution state; errKernelGone if unknown.
func (j jupyter) state(ctx context.Context, id string) (string, error) {
	var m kernelModel
	err := j.call(ctx, http.MethodGet, "api/kernels/"+id, nil, &m)
	return m.ExecutionState, err
}

func (j jupyter) interrupt(ctx context.Context, id string) error {
	return j.call(ctx, http.MethodPost, "api/kernels/"+id+"/interrupt", nil, nil)
}

// restart restarts the kernel in place: same id, a new process.
func (j jupyter) restart(ctx context.Context, id string) error {
	return j.call(ctx, http.MethodPost, "api/kernels/"+id+"/restart", nil, nil)
}

func (j jupyter) shutdown(ctx context.Context, id string) error {
	return j.call(ctx, http.MethodDelete, "api/kernels/"+id, nil, nil)
}

// jheader is a Jupyter message header. An empty one encodes as {}, which is
// what a request's parent_header must be.
type jheader struct {
	MsgID    string `json:"msg_id,omitempty"`
	Session  string `json:"session,omitempty"`
	Username string `json:"username,omitempty"`
	Date     string `json:"date,omitempty"`
	MsgType  string `json:"msg_type,omitempty"`
	Version  string `json:"version,omitempty"`
}

// jmsg is a Jupyter message as the notebook server relays it.
type jmsg struct {
	Header       jheader         `json:"header"`
	ParentHeader jheader         `json:"parent_header"`
	Metadata     json.RawMessage `json:"metadata"`
	Content      json.RawMessage `json:"content"`
	Channel      string          `json:"channel"`
}

// kconn is one WebSocket connection to a kernel's channels. A goroutine it
// owns reads messages into msgs until the connection breaks or is closed.
type kconn struct {
	ws      *websocket.Conn
	session string
	msgs    chan jmsg
	done    chan struct{} // closed when the reader has ended
	err     error         // why the reader ended; read after done
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// connect opens the kernel's channels. The server answers the handshake
// only once the kernel has answered a kernel_info request, so a kernel
// that is starting is ready when this returns.
func (j jupyter) connect(ctx context.Context, id string) (*kconn, error) {
	session := newMsgID()
	u := "ws" + strings.TrimPrefix(j.base, "http") + "api/kernels/" + id + "/channels?session_id=" + session
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: j.http})
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return nil, errKernelGone
		}
		return nil, fmt.Errorf("connect to kernel: %w", err)
	}
	ws.SetReadLimit(jupyterReadLimit)
	// The connection lives until close; the dial's ctx bounded only the handshake.
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	c := &kconn{ws: ws, session: session, msgs: make(chan jmsg, 64), done: make(chan struct{}), stop: stop}
	c.wg.Add(1)
	go c.read(life)
	return c, nil
}

func (c *kconn) read(ctx context.Context) {
	defer c.wg.Done()
	defer close(c.done)
	for {
		typ, data, err := c.ws.Read(ctx)
		if err != nil {
			c.err = err
			return
		}
		m, err := parseMsg(typ, data)
		if err != nil {
			continue // not ours to fail on: skip what cannot be parsed
		}
		select {
		case c.msgs <- m:
		case <-ctx.Done():
			c.err = ctx.Err()
			return
		}
	}
}

// parseMsg decodes a message frame. A binary frame (a message with buffers)
// is a count, offsets, then the JSON message and the buffers, which are
// dropped.
func parseMsg(typ websocket.MessageType, data []byte) (jmsg, error) {
	if typ == websocket.MessageBinary {
		if len(data) < 12 {
			return jmsg{}, errors.New("short binary message")
		}
		n := binary.BigEndian.Uint32(data)
		start, end := binary.BigEndian.Uint32(data[4:]), binary.BigEndian.Uint32(data[8:])
		if n == 0 || uint64(end) > uint64(len(data)) || start > end || uint64(4+4*n) > uint64(len(data)) {
			return jmsg{}, errors.New("bad binary message")
		}
		data = data[start:end]
	}
	var m jmsg
	err := json.Unmarshal(data, &m)
	return m, err
}

// send sends a request on channel and returns its msg_id.
func (c *kconn) send(ctx context.Context, channel, msgType string, content any) (string, error) {
	body, err := json.Marshal(content)
	if err != nil {
		return "", err
	}
	id := newMsgID()
	m := jmsg{
		Header: jheader{
			MsgID: id, Session: c.session, Username: "agentbox", MsgType: msgType, Version: "5.3",
			Date: time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"),
		},
		Metadata: json.RawMessage("{}"), Content: body, Channel: channel,
	}
	data, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	// A cancelled write closes the connection, so it gets its own bound.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, data); err != nil {
		return "", fmt.Errorf("send %s: %w", msgType, err)
	}
	return id, nil
}

// close ends the connection and waits for its reader.
func (c *kconn) close() {
	if c == nil {
		return
	}
	_ = c.ws.CloseNow()
	c.stop()
	c.wg.Wait()
}

// broken says why the connection ended.
func (c *kconn) broken() error {
	<-c.done
	if c.err == nil {
		return errors.New("connection to the kernel closed")
	}
	return fmt.Errorf("connection to the kernel: %w", c.err)
}

// newMsgID returns a random UUID (version 4), the form Jupyter uses for ids.
func newMsgID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
