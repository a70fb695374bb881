package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// deadlineBody is a request body that must arrive in time: it holds its
// connection's read deadline, set when the request reaches the API (the
// headers are in) and cleared once the body is. A request without a body
// (an event stream, a download, a WebSocket) gets none, so nothing cuts
// it; a handler that never reads its body is still bounded, as the server
// reads what is left of it under the same deadline before it answers.
//
// An upload (see asUpload) has a minimum average rate instead: by each
// moment it must have sent rate bytes a second for the time past the
// first timeout, and no pause may be longer than timeout.
type deadlineBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	start   time.Time
	timeout time.Duration
	rate    int64 // bytes a second; 0 for a fixed deadline
	n       int64 // bytes read
}

// errBodyTimeout is a body that did not arrive in time (408).
type errBodyTimeout struct {
	timeout time.Duration
	rate    int64
}

func (e *errBodyTimeout) Error() string {
	if e.rate > 0 {
		return fmt.Sprintf("the upload came slower than %d bytes a second, or paused longer than %v", e.rate, e.timeout)
	}
	return fmt.Sprintf("the request body did not arrive within %v", e.timeout)
}

// UploadDeadline puts the body of every request h serves under timeout
// and rate, as the API does its uploads' (see Config.BodyTimeout and
// MinUploadRate): for a worker's internal endpoint, whose bodies are what
// the API replicas pass on to a job's desktop and Jupyter.
func UploadDeadline(h http.Handler, timeout time.Duration, rate int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limitBody(w, r, timeout)
		asUpload(r, rate)
		h.ServeHTTP(w, r)
	})
}

// limitBody puts r's body, if it has one, under the body deadline.
func limitBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	b := &deadlineBody{ReadCloser: r.Body, rc: http.NewResponseController(w), start: time.Now(), timeout: timeout}
	if b.setDeadline(b.start.Add(b.timeout)) {
		r.Body = b
	}
}

// asUpload gives r's body, an upload, the minimum rate in place of the
// body deadline. Call it before reading the body.
func asUpload(r *http.Request, rate int64) {
	if b, ok := r.Body.(*deadlineBody); ok {
		b.rate = rate
	}
}

// setDeadline sets the connection's read deadline, and reports whether it
// could (an HTTP/2 stream or a test's recorder may not).
func (b *deadlineBody) setDeadline(t time.Time) bool {
	return b.rc.SetReadDeadline(t) == nil
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	switch {
	case err == io.EOF:
		b.setDeadline(time.Time{}) // the body is in; the server sets the next deadline for the next request
	case err != nil && errors.Is(err, os.ErrDeadlineExceeded):
		return n, &errBodyTimeout{timeout: b.timeout, rate: b.rate}
	case n > 0 && b.rate > 0:
		b.setDeadline(b.next(time.Now()))
	}
	return n, err
}

// next is an upload's deadline once it has sent b.n bytes, at now: when it
// would fall under the rate, or a pause of timeout from now, whichever
// comes first.
func (b *deadlineBody) next(now time.Time) time.Time {
	earned := time.Duration(float64(b.n) / float64(b.rate) * float64(time.Second))
	return minTime(b.start.Add(b.timeout+earned), now.Add(b.timeout))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
