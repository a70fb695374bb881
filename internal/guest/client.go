package guest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Client talks to one guest over the connections its Dialer opens: a
// unix socket, a vsock port or TCP. Everything the guest returns is capped
// in size before it is decoded.
type Client struct {
	http *http.Client
	// probe dials afresh for every request, so Health checks the socket as
	// it is now, not a connection made before the sandbox replaced it.
	probe *http.Client
	// MaxResponseBytes caps a JSON answer (default 16 MiB plus twice the
	// largest exec output asked for).
	MaxResponseBytes int64
	// dial and secret open raw connections (Egress); dial is nil for a
	// client made by NewWithTransport.
	dial   Dialer
	secret string
}

// New returns a client of the guest that dial reaches. A non-empty secret
// is sent with every request (the guest refuses requests without it when it
// listens on a network); it is never logged.
func New(dial Dialer, secret string) *Client {
	dc := func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) }
	var tr http.RoundTripper = &http.Transport{
		DialContext:            dc,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	}
	var probe http.RoundTripper = &http.Transport{DialContext: dc, DisableKeepAlives: true, DisableCompression: true,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes}
	if secret != "" {
		tr, probe = withSecret{tr, secret}, withSecret{probe, secret}
	}
	return &Client{http: &http.Client{Transport: tr}, probe: &http.Client{Transport: probe}, MaxResponseBytes: 16 << 20,
		dial: dial, secret: secret}
}

// MaxResponseHeaderBytes bounds the headers of one answer from a guest,
// or from a web service in its sandbox through the guest's proxy: the
// sandbox writes them, and net/http's default (10 MiB) let 40 requests
// at once cost the host 340 MB. A desktop or Jupyter page's headers are a
// few KiB.
const MaxResponseHeaderBytes = 64 << 10

// NewWithTransport returns a client whose every request goes through tr,
// which reaches the guest some other way than a Dialer (a tunnel through
// the worker running the sandbox, say) and adds any credentials itself.
// Requests are for host "guest" with the guest's own paths; Close reaches
// tr only if it has a CloseIdleConnections method.
func NewWithTransport(tr http.RoundTripper) *Client {
	return &Client{http: &http.Client{Transport: tr}, probe: &http.Client{Transport: tr}, MaxResponseBytes: 16 << 20}
}

// NewClient returns a client of the guest listening on socketPath. Its
// directory is trusted; the socket itself is never reached through a link
// (see NewClientAt).
func NewClient(socketPath string) *Client { return New(UnixDialer(socketPath), "") }

// NewClientAt returns a client of the guest whose socket is rel beneath
// dir. dir is the host's own; each component of rel may have been written
// by the sandbox, so the client connects only if each is a real directory
// and the last a socket, never following a link, and fails with
// ErrUnsafeSocket otherwise.
func NewClientAt(dir, rel string) *Client { return New(UnixDialerAt(dir, rel), "") }

// withSecret adds the sandbox's secret to every request it carries,
// proxied ones included.
type withSecret struct {
	next   http.RoundTripper
	secret string
}

func (w withSecret) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(SecretHeader, w.secret)
	return w.next.RoundTrip(r)
}

// idleCloser is what the transports under a Client can do besides carrying
// requests.
type idleCloser interface{ CloseIdleConnections() }

func (w withSecret) CloseIdleConnections() {
	if c, ok := w.next.(idleCloser); ok {
		c.CloseIdleConnections()
	}
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Health asks the guest for its health and version, over a new connection:
// it checks the socket as it is now (the watchdog relies on that).
func (c *Client) Health(ctx context.Context) (Health, error) {
	fresh := *c
	fresh.http = c.probe
	var h Health
	err := fresh.doJSON(ctx, http.MethodGet, "/health", nil, nil, &h)
	return h, err
}

// Handshake checks that the guest answers and speaks ProtocolVersion.
func (c *Client) Handshake(ctx context.Context) (Health, error) {
	h, err := c.Health(ctx)
	if err != nil {
		return h, err
	}
	if h.Protocol != ProtocolVersion {
		return h, fmt.Errorf("%w: guest %s speaks protocol %d, this agentbox speaks %d; recreate the sandbox with this binary", ErrProtocol, h.Version, h.Protocol, ProtocolVersion)
	}
	return h, nil
}

// DefaultCallTimeout bounds a file call whose context has no deadline: the
// guest runs as the agent's uid, so the host never waits on it unbounded.
const DefaultCallTimeout = 5 * time.Minute

// execMargin is how long past a command's own timeout the client waits for
// the guest to report it.
const execMargin = time.Minute

// Exec runs a command and returns its result once it has ended. A non-zero
// exit is in the result; an error means the guest could not be asked.
func (c *Client) Exec(ctx context.Context, req ExecRequest) (ExecResult, error) {
	ctx, cancel := context.WithTimeout(ctx, execDeadline(req))
	defer cancel()
	var res ExecResult
	err := c.doJSON(ctx, http.MethodPost, "/exec", nil, req, &res, 3*req.OutputLimit())
	return res, err
}

func execDeadline(req ExecRequest) time.Duration {
	if req.TimeoutMS > 0 {
		return time.Duration(req.TimeoutMS)*time.Millisecond + execMargin
	}
	return DefaultExecTimeout + execMargin
}

// callContext applies DefaultCallTimeout when ctx has no deadline.
func callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultCallTimeout)
}

// ExecStream runs a command, calling onOutput with "stdout" or "stderr" and
// each chunk as it is produced. The returned result carries no output bodies.
func (c *Client) ExecStream(ctx context.Context, req ExecRequest, onOutput func(stream string, p []byte)) (ExecResult, error) {
	ctx, cancel := context.WithTimeout(ctx, execDeadline(req))
	defer cancel()
	return c.execStream(ctx, req, nil, onOutput)
}

// ExecWatch runs a command like Exec, its result carrying the output as
// Exec's does (each stream's head and tail within the cap), and calls
// onOutput with each chunk as it is produced, up to the cap. When the
// command is cut short (ctx ends, the guest goes away) the error comes
// with a result holding the output streamed until then (Canceled set), so
// the caller can still show it.
func (c *Client) ExecWatch(ctx context.Context, req ExecRequest, onOutput func(stream string, p []byte)) (ExecResult, error) {
	ctx, cancel := context.WithTimeout(ctx, execDeadline(req))
	defer cancel()
	var got [2]bytes.Buffer // what was streamed, within the cap
	keep := func(stream string, p []byte) {
		b := &got[0]
		if stream == "stderr" {
			b = &got[1]
		}
		b.Write(p[:min(len(p), max(int(req.OutputLimit())-b.Len(), 0))])
		onOutput(stream, p)
	}
	res, err := c.execStream(ctx, req, url.Values{"capture": {"1"}}, keep)
	if err != nil {
		return ExecResult{Stdout: got[0].Bytes(), Stderr: got[1].Bytes(), Canceled: true, ExitCode: -1}, err
	}
	if res.Stdout == nil && res.Stderr == nil { // a guest from before capture=1: the head it streamed
		res.Stdout, res.Stderr = got[0].Bytes(), got[1].Bytes()
	}
	return res, nil
}

func (c *Client) execStream(ctx context.Context, req ExecRequest, q url.Values, onOutput func(stream string, p []byte)) (ExecResult, error) {
	resp, err := c.do(ctx, http.MethodPost, "/exec/stream", q, jsonBody(req))
	if err != nil {
		return ExecResult{}, err
	}
	defer resp.Body.Close()
	// One output byte can cost ~40 bytes on the wire (an event per byte
	// written); the decoded output itself must stay within the caps, and a
	// captured result adds each stream's capture, base64-encoded.
	limit := req.OutputLimit()
	r := bufio.NewReaderSize(io.LimitReader(resp.Body, 84*limit+1<<20), 64<<10)
	dec := json.NewDecoder(r)
	var got int64
	for {
		var ev StreamEvent
		if err := dec.Decode(&ev); err != nil {
			if ctx.Err() != nil {
				return ExecResult{}, fmt.Errorf("exec stream: %w", context.Cause(ctx))
			}
			return ExecResult{}, fmt.Errorf("%w: exec stream ended early: %w", ErrUnavailable, err)
		}
		switch ev.Type {
		case "stdout", "stderr":
			if got += int64(len(ev.Data)); got > 2*limit+1024 {
				return ExecResult{}, fmt.Errorf("%w: guest streamed over its output cap", ErrTooLarge)
			}
			onOutput(ev.Type, ev.Data)
		case "exit", "error":
			if ev.Result == nil {
				return ExecResult{}, fmt.Errorf("%w: exec stream: %s event without result", ErrUnavailable, ev.Type)
			}
			if int64(len(ev.Result.Stdout)) > limit+1024 || int64(len(ev.Result.Stderr)) > limit+1024 {
				return ExecResult{}, fmt.Errorf("%w: guest captured over its output cap", ErrTooLarge)
			}
			return *ev.Result, nil
		}
	}
}

// ReadFile reads a whole file (up to the guest's read limit).
func (c *Client) ReadFile(ctx context.Context, path string) ([]byte, error) {
	return c.ReadRange(ctx, path, 0, 0)
}

// ReadRange reads limit bytes from offset; limit 0 means to the end.
func (c *Client) ReadRange(ctx context.Context, path string, offset, limit int64) ([]byte, error) {
	q := url.Values{"path": {path}}
	if offset > 0 {
		q.Set("offset", strconv.FormatInt(offset, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.FormatInt(limit, 10))
	}
	ctx, cancel := callContext(ctx)
	defer cancel()
	resp, err := c.do(ctx, http.MethodGet, "/files/read", q, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	max := 256 << 20
	if limit > 0 {
		max = int(limit)
	}
	return readCapped(resp.Body, int64(max))
}

// WriteFile writes data to path, creating parent directories; mode 0 means 0644.
func (c *Client) WriteFile(ctx context.Context, path string, data []byte, mode uint32) (FileInfo, error) {
	return c.WriteFrom(ctx, path, bytes.NewReader(data), mode)
}

// WriteFrom writes what r yields to path; the guest replaces the file atomically.
func (c *Client) WriteFrom(ctx context.Context, path string, r io.Reader, mode uint32) (FileInfo, error) {
	q := url.Values{"path": {path}}
	if mode != 0 {
		q.Set("mode", strconv.FormatUint(uint64(mode), 8))
	}
	var fi FileInfo
	err := c.doJSON(ctx, http.MethodPut, "/files/write", q, r, &fi)
	return fi, err
}

// List lists a directory, recursively if asked; max 0 means the guest's default.
func (c *Client) List(ctx context.Context, path string, recursive bool, max int) (Listing, error) {
	q := url.Values{"path": {path}}
	if recursive {
		q.Set("recursive", "1")
	}
	if max > 0 {
		q.Set("max", strconv.Itoa(max))
	}
	var l Listing
	err := c.doJSON(ctx, http.MethodGet, "/files/list", q, nil, &l)
	return l, err
}

// Stat describes one path without following a final symlink.
func (c *Client) Stat(ctx context.Context, path string) (FileInfo, error) {
	var fi FileInfo
	err := c.doJSON(ctx, http.MethodGet, "/files/stat", url.Values{"path": {path}}, nil, &fi)
	return fi, err
}

// Delete removes a file, or a directory tree when recursive.
func (c *Client) Delete(ctx context.Context, path string, recursive bool) error {
	q := url.Values{"path": {path}}
	if recursive {
		q.Set("recursive", "1")
	}
	ctx, cancel := callContext(ctx)
	defer cancel()
	resp, err := c.do(ctx, http.MethodDelete, "/files", q, nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// Move renames a file or directory inside the workspace.
func (c *Client) Move(ctx context.Context, req MoveRequest) (FileInfo, error) {
	var fi FileInfo
	err := c.doJSON(ctx, http.MethodPost, "/files/move", nil, req, &fi)
	return fi, err
}

// Search finds lines matching a regular expression, like grep -rn.
func (c *Client) Search(ctx context.Context, req SearchRequest) (SearchResult, error) {
	var res SearchResult
	err := c.doJSON(ctx, http.MethodPost, "/files/search", nil, req, &res)
	return res, err
}

// Archive streams the directory at path as "zip" or "tar". The caller closes
// the reader and must cap what it reads.
func (c *Client) Archive(ctx context.Context, path, format string) (io.ReadCloser, error) {
	resp, err := c.do(ctx, http.MethodGet, "/files/archive", url.Values{"path": {path}, "format": {format}}, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// doJSON sends body (an io.Reader, or a value encoded as JSON) and decodes the
// answer into out, reading at most the client's cap plus extra.
func (c *Client) doJSON(ctx context.Context, method, path string, q url.Values, body, out any, extra ...int64) error {
	ctx, cancel := callContext(ctx)
	defer cancel()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case io.Reader:
		r = b
	default:
		r = jsonBody(b)
	}
	resp, err := c.do(ctx, method, path, q, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	max := c.MaxResponseBytes
	for _, e := range extra {
		max += e
	}
	data, err := readCapped(resp.Body, max)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%w: %s %s: bad answer: %w", ErrUnavailable, method, path, err)
	}
	return nil
}

func (c *Client) do(ctx context.Context, method, path string, q url.Values, body io.Reader) (*http.Response, error) {
	u := "http://guest" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("guest %s %s: %w", method, path, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("guest %s %s: %w", method, path, context.Cause(ctx))
		}
		return nil, fmt.Errorf("%w: %s %s: %w", ErrUnavailable, method, path, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

func decodeError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var eb ErrorBody
	if json.Unmarshal(data, &eb) == nil && eb.Error != nil {
		return eb.Error
	}
	return fmt.Errorf("%w: status %d: %.200s", ErrUnavailable, resp.StatusCode, data)
}

func jsonBody(v any) io.Reader {
	b, err := json.Marshal(v)
	if err != nil { // only unmarshalable types, a programming error
		panic(fmt.Sprintf("guest: encode request: %v", err))
	}
	return bytes.NewReader(b)
}

// readCapped reads all of r, failing if it yields more than max bytes.
func readCapped(r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading answer: %w", ErrUnavailable, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: answer over %d bytes", ErrTooLarge, max)
	}
	return data, nil
}
