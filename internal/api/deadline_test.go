package api_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/store"
)

// trickle sends a request whose body of n bytes comes one byte every
// interval, on a connection of its own, and returns the status line the
// server answered and how long the connection stayed open. The test's
// own limit is far under the trickle's length, so a server that waits for
// the whole body fails it.
func trickle(t *testing.T, url, head string, n int, interval time.Duration) (status string, open time.Duration) {
	t.Helper()
	host := strings.TrimPrefix(url, "http://")
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "%sHost: %s\r\nContent-Length: %d\r\n\r\n", head, host, n)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for range n {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
		}
	}()
	c.SetReadDeadline(start.Add(time.Duration(n) * interval / 4))
	answer, err := io.ReadAll(c)                           // to its end: the server closes the connection
	if err != nil && !errors.Is(err, syscall.ECONNRESET) { // reset: closed with the rest of the body unread
		t.Fatalf("the connection was still open after %v: %v (answered %q)", time.Since(start), err, answer)
	}
	status, _, _ = strings.Cut(string(answer), "\r\n")
	return status, time.Since(start)
}

// TestSlowBodyIsCut: a body trickled one byte at a time is cut at the
// body deadline, whether its route reads it (a submission, the sign-in
// form) or refuses the request before reading it (no token): the server
// reads what is left of a refused body before answering.
func TestSlowBodyIsCut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	e := apitest.New(t, api.Config{BodyTimeout: timeout})
	id := e.Submit("x").ID
	tests := []struct {
		name, head, status string
	}{
		{"submission", "POST /v1/jobs HTTP/1.1\r\nAuthorization: Bearer " + apitest.Token + "\r\nContent-Type: application/json\r\n", "HTTP/1.1 408 Request Timeout"},
		{"sign-in", "POST /ui/login HTTP/1.1\r\nOrigin: " + e.URL + "\r\nSec-Fetch-Site: same-origin\r\nContent-Type: application/x-www-form-urlencoded\r\n", "HTTP/1.1 408 Request Timeout"},
		{"no token", "POST /v1/jobs/" + id + "/cancel HTTP/1.1\r\n", "HTTP/1.1 401 Unauthorized"},
		{"multipart", "POST /v1/jobs HTTP/1.1\r\nAuthorization: Bearer " + apitest.Token + "\r\nContent-Type: multipart/form-data; boundary=b\r\n", "HTTP/1.1 408 Request Timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, open := trickle(t, e.URL, tt.head, 400, 50*time.Millisecond)
			if status != tt.status {
				t.Errorf("answered %q, want %q", status, tt.status)
			}
			t.Logf("closed after %v", open)
		})
	}
}

// pacedReader gives data in chunks, one each interval, and counts what
// was taken.
type pacedReader struct {
	data  []byte
	chunk int
	tick  *time.Ticker
	sent  atomic.Int64
}

func (p *pacedReader) Read(b []byte) (int, error) {
	if len(p.data) == 0 {
		return 0, io.EOF
	}
	<-p.tick.C
	n := copy(b, p.data[:min(p.chunk, len(p.data))])
	p.data = p.data[n:]
	p.sent.Add(int64(n))
	return n, nil
}

// uploadBody is a multipart submission with a workspace of size bytes
// that do not compress.
func uploadBody(t *testing.T, size int) (body []byte, contentType string) {
	t.Helper()
	content := make([]byte, size)
	rand.Read(content)
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	w, _ := mw.CreateFormField("job")
	io.WriteString(w, `{"task":"t"}`)
	w, _ = mw.CreateFormFile("workspace", "ws.zip")
	w.Write(zipOf(t, map[string]string{"blob.bin": string(content)}))
	mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

// paced posts body at chunk bytes each interval.
func paced(t *testing.T, e *apitest.Env, body []byte, contentType string, chunk int, interval time.Duration) (status int, sent int64, took time.Duration) {
	t.Helper()
	p := &pacedReader{data: body, chunk: chunk, tick: time.NewTicker(interval)}
	defer p.tick.Stop()
	r, _ := http.NewRequest("POST", e.URL+"/v1/jobs", p)
	r.ContentLength = int64(len(body))
	r.Header.Set("Authorization", "Bearer "+apitest.Token)
	r.Header.Set("Content-Type", contentType)
	start := time.Now()
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		return 0, p.sent.Load(), time.Since(start) // cut while sending
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, p.sent.Load(), time.Since(start)
}

// TestUploadRate: an upload at a good rate may take longer than the body
// deadline; one under the minimum rate is cut long before it ends.
func TestUploadRate(t *testing.T) {
	const timeout = 300 * time.Millisecond
	e := apitest.New(t, api.Config{BodyTimeout: timeout, MinUploadRate: 64 << 10})
	body, ct := uploadBody(t, 200<<10)

	status, _, took := paced(t, e, body, ct, 16<<10, 50*time.Millisecond) // 320 KiB/s, ~0.65s
	if status != http.StatusCreated || took < 2*timeout {
		t.Errorf("at 320 KiB/s: %d after %v; want 201 after more than %v", status, took, 2*timeout)
	}
	status, sent, took := paced(t, e, body, ct, 1<<10, 50*time.Millisecond) // 20 KiB/s: 10s
	if status == http.StatusCreated || sent == int64(len(body)) {
		t.Errorf("at 20 KiB/s: %d after %v, %d of %d bytes sent; want it cut", status, took, sent, len(body))
	}
	t.Logf("the slow upload was cut after %v and %d bytes", took, sent)
	if p, err := e.Svc.List(t.Context(), store.ListOptions{}); err != nil || len(p.Jobs) != 1 {
		t.Errorf("%d jobs after the cut upload (%v); want the good one only", len(p.Jobs), err)
	}
}

// TestStreamsOutliveTheBodyDeadline: requests without a body (an event
// stream, a slow download) are not cut by the body deadline.
func TestStreamsOutliveTheBodyDeadline(t *testing.T) {
	const timeout = 200 * time.Millisecond
	e := apitest.New(t, api.Config{BodyTimeout: timeout})
	id := e.Submit("x").ID
	e.Start(id)

	s := openStream(t, e, "/v1/jobs/"+id+"/events", nil)
	time.AfterFunc(3*timeout, func() { e.Finish(id, store.StatusComplete, "") })
	seqs := s.rest()
	if len(seqs) < 3 {
		t.Errorf("stream got %v; want the events written after the body deadline, up to the end", seqs)
	}

	big := strings.Repeat("0123456789abcdef", 1<<18) // 4 MiB
	e.WriteFile(id, "big.txt", big)
	resp, err := http.DefaultClient.Do(authGet(e, "/v1/jobs/"+id+"/files/big.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got bytes.Buffer
	br := bufio.NewReaderSize(resp.Body, 1<<10)
	tick := time.NewTicker(timeout / 4)
	defer tick.Stop()
	start := time.Now()
	for time.Since(start) < 3*timeout { // read slowly past the deadline
		<-tick.C
		if _, err := io.CopyN(&got, br, 64<<10); err != nil {
			t.Fatalf("download cut after %v: %v", time.Since(start), err)
		}
	}
	if _, err := io.Copy(&got, br); err != nil || got.String() != big {
		t.Errorf("download: %d of %d bytes, %v", got.Len(), len(big), err)
	}
}

func authGet(e *apitest.Env, path string) *http.Request {
	r, _ := http.NewRequest("GET", e.URL+path, nil)
	r.Header.Set("Authorization", "Bearer "+apitest.Token)
	return r
}

// TestProxyOutlivesTheBodyDeadline: the desktop's WebSocket through the
// proxy lasts longer than the body deadline.
func TestProxyOutlivesTheBodyDeadline(t *testing.T) {
	e := newProxyEnv(t, api.Config{BodyTimeout: 200 * time.Millisecond})
	id := e.running()
	if _, err := dialWS(t, e, id, http.Header{"Authorization": {"Bearer " + apitest.Token}}); err != nil {
		t.Fatalf("websocket: %v", err)
	}
}
