// Package client is the Go client of agentbox's HTTP API (internal/api),
// speaking the wire types of internal/wire: jobs, their event stream
// (followed over SSE, resuming after a dropped connection), and downloads
// of their workspaces. The CLI's submit, status, list, logs, reply, cancel
// and download commands are built on it.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/wire"
)

// Client talks to one agentbox server. It is safe for concurrent use.
type Client struct {
	base  string // scheme://host[/prefix], no trailing slash
	token string
	// tried and advice say, should the server refuse the token, which
	// one it was (or why none was sent) and what to do (see Connect).
	tried, advice string
	// HTTP is the underlying client; it must not time out whole requests,
	// since event streams last as long as their job.
	HTTP *http.Client
	// RetryDelay is the first wait before Follow reconnects; it doubles up
	// to 5s. Default 500ms.
	RetryDelay time.Duration
	// MaxRetries is how many reconnects in a row without receiving anything
	// Follow makes before giving up. Default 5.
	MaxRetries int
}

// New returns a client of the server at baseURL (http or https) that sends
// token as a bearer token (none if empty).
func New(baseURL, token string) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server URL %q: want http://host:port or https://host", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("server URL %q: no credentials, query or fragment allowed", baseURL)
	}
	c := &Client{base: strings.TrimRight(u.String(), "/"), token: token, HTTP: &http.Client{}}
	c.tried, c.advice = "refused the token given", "give this server's token"
	if token == "" {
		c.tried = "wants a token and none was sent"
	}
	return c, nil
}

// URL returns the server's base URL.
func (c *Client) URL() string { return c.base }

// ErrUnreachable means no connection to the server could be made.
var ErrUnreachable = errors.New("cannot reach the agentbox server")

// Error is an error answer of the server.
type Error struct {
	StatusCode int
	Code       string // one of the wire.Code* constants; empty if the body was not a JSON error
	Message    string
	URL        string
	// Job is the job the request was about, if any: a 404 for it is
	// "no job ID on URL".
	Job string
	// Tried and Advice are set on a 401: which token the client sent, by
	// its source, or why it sent none ("refused the token from
	// AGENTBOX_TOKEN"); and what to do.
	Tried, Advice string
}

func (e *Error) Error() string {
	if e.StatusCode == http.StatusUnauthorized {
		return fmt.Sprintf("the server at %s %s (401 %s): %s", e.URL, e.Tried, e.Message, e.Advice)
	}
	if e.StatusCode == http.StatusNotFound && e.Message == wire.MessageNoSuchJob && e.Job != "" {
		return fmt.Sprintf("no job %s on %s", e.Job, e.URL)
	}
	if e.Code == "" {
		return fmt.Sprintf("server answered %d: %s", e.StatusCode, e.Message)
	}
	return fmt.Sprintf("%s (%d %s)", e.Message, e.StatusCode, e.Code)
}

// IsNotFound reports whether err is the server saying the job (or file) does
// not exist.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode == http.StatusNotFound
}

// do sends a request and returns the response if its status is want;
// otherwise it returns the server's error. The caller closes the body.
func (c *Client) do(ctx context.Context, method, path string, body any, hdr http.Header, want int) (*http.Response, error) {
	if body == nil {
		return c.send(ctx, method, path, nil, "", hdr, want)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return c.send(ctx, method, path, bytes.NewReader(b), "application/json", hdr, want)
}

// send is do with a body of the given content type, as it is read.
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, contentType string, hdr http.Header, want int) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	copyHeader(req.Header, hdr)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, err)
	}
	if resp.StatusCode != want {
		defer resp.Body.Close()
		return nil, c.serverError(resp, path)
	}
	return resp, nil
}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = v
	}
}

func (c *Client) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	var op *net.OpError
	if errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &op) && op.Op == "dial") {
		return fmt.Errorf("%w at %s: is agentbox serve running at %s? (%v)", ErrUnreachable, c.base, c.base, err)
	}
	return fmt.Errorf("request to %s: %w", c.base, err)
}

// serverError is the error answer resp to a request of path.
func (c *Client) serverError(resp *http.Response, path string) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &Error{StatusCode: resp.StatusCode, URL: c.base, Job: jobOf(path)}
	if resp.StatusCode == http.StatusUnauthorized {
		e.Tried, e.Advice = c.tried, c.advice
	}
	var body wire.ErrorResponse
	if json.Unmarshal(b, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message = body.Error.Code, c.redact(body.Error.Message)
		return e
	}
	e.Message = http.StatusText(resp.StatusCode)
	if s := strings.TrimSpace(string(b)); s != "" {
		e.Message += ": " + truncate(c.redact(s), 200)
	}
	return e
}

// redact keeps the token out of a server's message: an error is printed,
// logged, pasted into issues.
func (c *Client) redact(msg string) string {
	if c.token == "" {
		return msg
	}
	return strings.ReplaceAll(msg, c.token, "<token>")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// getJSON decodes the answer of a request into out.
func (c *Client) getJSON(ctx context.Context, method, path string, body any, hdr http.Header, want int, out any) error {
	resp, err := c.do(ctx, method, path, body, hdr, want)
	if err != nil {
		return err
	}
	return decodeAnswer(resp, method, path, out)
}

// decodeAnswer decodes a response's body into out and closes it.
func decodeAnswer(resp *http.Response, method, path string, out any) error {
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
	}
	return nil
}

func jobPath(id string) string { return "/v1/jobs/" + url.PathEscape(id) }

// jobOf is the job ID in a request path jobPath made, else "".
func jobOf(path string) string {
	rest, ok := strings.CutPrefix(path, "/v1/jobs/")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	id, err := url.PathUnescape(rest)
	if err != nil {
		return ""
	}
	return id
}

// Submit submits a job. A non-empty idempotencyKey makes retries safe: the
// server returns the job it created for the key the first time.
func (c *Client) Submit(ctx context.Context, req wire.SubmitRequest, idempotencyKey string) (wire.SubmitResponse, error) {
	var out wire.SubmitResponse
	err := c.getJSON(ctx, "POST", "/v1/jobs", req, keyHeader(idempotencyKey), http.StatusCreated, &out)
	return out, err
}

func keyHeader(idempotencyKey string) http.Header {
	if idempotencyKey == "" {
		return nil
	}
	return http.Header{"Idempotency-Key": {idempotencyKey}}
}

// Get returns a job.
func (c *Client) Get(ctx context.Context, id string) (wire.Job, error) {
	var out wire.Job
	err := c.getJSON(ctx, "GET", jobPath(id), nil, nil, http.StatusOK, &out)
	return out, err
}

// Workers lists the workers registered with the server (GET /v1/workers).
func (c *Client) Workers(ctx context.Context) ([]wire.Worker, error) {
	var out wire.WorkerList
	err := c.getJSON(ctx, "GET", "/v1/workers", nil, nil, http.StatusOK, &out)
	return out.Workers, err
}

// ListOptions filter and page List.
type ListOptions struct {
	Status string // empty: all
	Limit  int    // 0: the server's default
	Cursor string // NextCursor of the previous page
}

// List returns a page of jobs, newest first.
func (c *Client) List(ctx context.Context, opts ListOptions) (wire.JobList, error) {
	q := url.Values{}
	if opts.Status != "" {
		q.Set("status", opts.Status)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	path := "/v1/jobs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out wire.JobList
	err := c.getJSON(ctx, "GET", path, nil, nil, http.StatusOK, &out)
	return out, err
}

// Cancel asks the server to cancel a job and returns the job as it is then.
func (c *Client) Cancel(ctx context.Context, id string) (wire.Job, error) {
	var out wire.Job
	err := c.getJSON(ctx, "POST", jobPath(id)+"/cancel", nil, nil, http.StatusAccepted, &out)
	return out, err
}

// Reply sends a message to a job: a follow-up that starts an ended job's
// next turn, or a steer a running job's model reads at its next step. It
// returns the job as it is then, and the seq just before the message's
// event, from which Follow shows the message and what follows it.
func (c *Client) Reply(ctx context.Context, id, message string) (wire.Job, int64, error) {
	path := jobPath(id) + "/messages"
	resp, err := c.do(ctx, "POST", path, wire.MessageRequest{Message: message}, nil, http.StatusAccepted)
	if err != nil {
		return wire.Job{}, 0, err
	}
	var out wire.Job
	err = decodeAnswer(resp, "POST", path, &out)
	return out, afterIn(resp.Header.Get("Location")), err
}

// afterIn reads the after parameter of an events URL (0 if none).
func afterIn(location string) int64 {
	u, err := url.Parse(location)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(u.Query().Get("after"), 10, 64)
	return max(n, 0)
}

// Delete asks the server to remove an ended job's data (its workspace)
// and returns the job, marked deleted; its record and events stay.
func (c *Client) Delete(ctx context.Context, id string) (wire.Job, error) {
	var out wire.Job
	err := c.getJSON(ctx, "DELETE", jobPath(id), nil, nil, http.StatusOK, &out)
	return out, err
}

// Deletion is the answer to DeleteOnce: the job, and whether its data
// was deleted before the call. It marshals as the job alone.
type Deletion struct {
	wire.Job
	Already bool `json:"-"`
}

// DeleteOnce deletes job id's data like Delete, noting whether it already
// was (`agentbox delete` says so).
func (c *Client) DeleteOnce(ctx context.Context, id string) (Deletion, error) {
	before, err := c.Get(ctx, id)
	if err != nil {
		return Deletion{}, err
	}
	j, err := c.Delete(ctx, id)
	return Deletion{Job: j, Already: !before.DeletedAt.IsZero()}, err
}

// Events returns up to limit (0: the server's default) events with seq
// greater than after.
func (c *Client) Events(ctx context.Context, id string, after int64, limit int) (wire.EventPage, error) {
	path := jobPath(id) + "/events?after=" + strconv.FormatInt(after, 10)
	if limit > 0 {
		path += "&limit=" + strconv.Itoa(limit)
	}
	var out wire.EventPage
	err := c.getJSON(ctx, "GET", path, nil, nil, http.StatusOK, &out)
	return out, err
}

// ReadEvents calls fn for each event the job has logged so far with seq
// greater than after, reading page by page. Unlike Follow it does not wait
// for more. An error of fn stops it and is returned as is.
func (c *Client) ReadEvents(ctx context.Context, id string, after int64, fn func(wire.Event) error) error {
	for {
		page, err := c.Events(ctx, id, after, 1000)
		if err != nil {
			return err
		}
		for _, ev := range page.Events {
			if err := fn(ev); err != nil {
				return err
			}
		}
		if !page.HasMore {
			return nil
		}
		after = page.NextAfter
	}
}

// Viewer asks for links that open a job's desktop and Jupyter in a
// browser, made absolute against the server's URL. Each link works once,
// within a minute (see wire.ViewerLinks).
func (c *Client) Viewer(ctx context.Context, id string) (wire.ViewerLinks, error) {
	var out wire.ViewerLinks
	if err := c.getJSON(ctx, "POST", jobPath(id)+"/viewer", nil, nil, http.StatusOK, &out); err != nil {
		return out, err
	}
	base, err := url.Parse(c.base)
	if err != nil {
		return out, err
	}
	for _, link := range []*string{&out.DesktopURL, &out.JupyterURL} {
		u, err := url.Parse(*link)
		if err != nil {
			return out, fmt.Errorf("viewer link %q: %w", *link, err)
		}
		*link = base.ResolveReference(u).String()
	}
	return out, nil
}
