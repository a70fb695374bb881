package client_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/client"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

func newClient(t *testing.T, url, token string) *client.Client {
	t.Helper()
	c, err := client.New(url, token)
	if err != nil {
		t.Fatal(err)
	}
	c.RetryDelay = time.Millisecond
	return c
}

func TestJobsRoundTrip(t *testing.T) {
	e := apitest.New(t, api.Config{})
	c := newClient(t, e.URL+"/", apitest.Token)
	ctx := context.Background()
	req := wire.SubmitRequest{Task: "hello", Limits: &wire.Limits{Timeout: wire.Duration(time.Minute)}, Metadata: map[string]string{"k": "v"}}
	sr, err := c.Submit(ctx, req, "key-1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Submit(ctx, req, "key-1")
	if err != nil || again.JobID != sr.JobID {
		t.Fatalf("idempotent replay: %+v %v", again, err)
	}
	j, err := c.Get(ctx, sr.JobID)
	if err != nil || j.Task != "hello" || j.Limits.Timeout != wire.Duration(time.Minute) || j.Metadata["k"] != "v" {
		t.Fatalf("get: %+v %v", j, err)
	}
	page, err := c.List(ctx, client.ListOptions{Status: "pending", Limit: 10})
	if err != nil || len(page.Jobs) != 1 {
		t.Fatalf("list: %+v %v", page, err)
	}
	j, err = c.Cancel(ctx, sr.JobID)
	if err != nil || j.Status != "canceled" {
		t.Fatalf("cancel: %+v %v", j, err)
	}
	ev, err := c.Events(ctx, sr.JobID, 0, 0)
	if err != nil || len(ev.Events) != 2 {
		t.Fatalf("events: %+v %v", ev, err)
	}
}

func TestErrors(t *testing.T) {
	e := apitest.New(t, api.Config{})
	ctx := context.Background()
	_, err := newClient(t, e.URL, apitest.Token).Get(ctx, "job_nope")
	var ce *client.Error
	if !client.IsNotFound(err) || !errors.As(err, &ce) || ce.Code != wire.CodeNotFound {
		t.Errorf("unknown job: %v", err)
	}
	_, err = newClient(t, e.URL, apitest.Token).Cancel(ctx, e.Submit("x").ID+"x")
	if !client.IsNotFound(err) {
		t.Errorf("cancel unknown: %v", err)
	}
	_, err = newClient(t, e.URL, "wrong").List(ctx, client.ListOptions{})
	if err == nil || !strings.Contains(err.Error(), "refused the token given") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("wrong token: %v", err)
	}
	_, err = newClient(t, e.URL, apitest.Token).Submit(ctx, wire.SubmitRequest{Task: ""}, "")
	if !errors.As(err, &ce) || ce.StatusCode != 422 || !strings.Contains(err.Error(), "task") {
		t.Errorf("invalid submit: %v", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	_, err = newClient(t, dead, "").Get(ctx, "x")
	if !errors.Is(err, client.ErrUnreachable) || !strings.Contains(err.Error(), "is agentbox serve running at "+dead) {
		t.Errorf("connection refused: %v", err)
	}

	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
	}))
	defer proxy.Close()
	_, err = newClient(t, proxy.URL, "").Get(ctx, "x")
	if !errors.As(err, &ce) || ce.StatusCode != 502 || !strings.Contains(err.Error(), "bad gateway") {
		t.Errorf("non-JSON error: %v", err)
	}
}

func TestNewRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://x", "http://user:pw@x", "http://x/?a=b"} {
		if _, err := client.New(u, ""); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
}

func TestFollow(t *testing.T) {
	e := apitest.New(t, api.Config{})
	c := newClient(t, e.URL, apitest.Token)
	id := e.Submit("x").ID
	e.Start(id)
	var seqs []int64
	err := c.Follow(context.Background(), id, 1, func(ev wire.Event) error {
		seqs = append(seqs, ev.Seq)
		if ev.Seq == 2 { // running: the job makes progress while we follow
			e.Emit(id, event.Output{Stream: "stdout", Text: strings.Repeat("x", 200<<10)})
			e.Finish(id, store.StatusComplete, "")
		}
		return nil
	})
	if err != nil || len(seqs) != 3 || seqs[0] != 2 || seqs[2] != 4 {
		t.Fatalf("follow: %v %v", seqs, err)
	}
	stop := errors.New("enough")
	err = c.Follow(context.Background(), id, 0, func(wire.Event) error { return stop })
	if err != stop {
		t.Errorf("callback error came back as %v", err)
	}
}

// flaky sits in front of the API and breaks the first event stream after
// its first event: cleanly (the response ends) or by cutting the connection.
type flaky struct {
	upstream string
	abort    bool
	mu       sync.Mutex
	streams  int
	lastIDs  []string
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.streams++
	first := f.streams == 1 && r.Header.Get("Accept") == "text/event-stream"
	f.lastIDs = append(f.lastIDs, r.Header.Get("Last-Event-ID"))
	f.mu.Unlock()
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, f.upstream+r.URL.RequestURI(), nil)
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), 502)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	if !first {
		_, _ = bufio.NewReader(resp.Body).WriteTo(w)
		return
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		w.Write([]byte(line))
		if err != nil || line == "\n" {
			break
		}
	}
	w.(http.Flusher).Flush()
	if f.abort {
		panic(http.ErrAbortHandler)
	}
}

func TestFollowResumesAfterADroppedStream(t *testing.T) {
	for _, abort := range []bool{false, true} {
		t.Run(map[bool]string{false: "ended", true: "cut"}[abort], func(t *testing.T) {
			e := apitest.New(t, api.Config{})
			id := e.Submit("x").ID                   // 1
			e.Start(id)                              // 2
			e.Emit(id, event.Command{Command: "ls"}) // 3
			f := &flaky{upstream: e.URL, abort: abort}
			proxy := httptest.NewServer(f)
			defer proxy.Close()
			c := newClient(t, proxy.URL, apitest.Token)
			var seqs []int64
			err := c.Follow(context.Background(), id, 1, func(ev wire.Event) error {
				seqs = append(seqs, ev.Seq)
				if ev.Seq == 2 {
					e.Emit(id, event.Output{Stream: "stdout", Text: "hi"}) // 4
					e.Finish(id, store.StatusError, "exit 1")              // 5
				}
				return nil
			})
			if err != nil || !equal(seqs, []int64{2, 3, 4, 5}) {
				t.Fatalf("follow: %v %v", seqs, err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.lastIDs) < 2 || f.lastIDs[0] != "1" || f.lastIDs[len(f.lastIDs)-1] != "2" {
				t.Errorf("Last-Event-ID of the requests: %q, want 1 then 2", f.lastIDs)
			}
		})
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFollowGivesUpOnAGoneServer(t *testing.T) {
	e := apitest.New(t, api.Config{})
	id := e.Submit("x").ID
	c := newClient(t, e.URL, apitest.Token)
	c.MaxRetries = 2
	err := c.Follow(context.Background(), id, 0, func(wire.Event) error {
		e.Server.CloseClientConnections()
		e.Server.Listener.Close()
		return nil
	})
	if !errors.Is(err, client.ErrUnreachable) || !strings.Contains(err.Error(), "giving up") {
		t.Errorf("err = %v", err)
	}
}

func TestDownloads(t *testing.T) {
	e := apitest.New(t, api.Config{})
	id := e.Submit("x").ID
	e.Finish(id, store.StatusComplete, "")
	e.WriteFile(id, "dir/a b#?.txt", "spaces and marks")
	c := newClient(t, e.URL, apitest.Token)
	var buf bytes.Buffer
	n, err := c.GetFile(context.Background(), id, "dir/a b#?.txt", &buf)
	if err != nil || buf.String() != "spaces and marks" || n != int64(buf.Len()) {
		t.Fatalf("get file: %q %d %v", buf.String(), n, err)
	}
	buf.Reset()
	n, err = c.DownloadArtifacts(context.Background(), id, &buf)
	if err != nil || n == 0 || !bytes.HasPrefix(buf.Bytes(), []byte("PK")) {
		t.Fatalf("artifacts: %d %v", n, err)
	}
	if _, err := c.GetFile(context.Background(), id, "../../etc/passwd", &buf); err == nil {
		t.Error("traversal accepted")
	}
}

func TestTruncatedDownloadIsAnError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Write([]byte("PK partial"))
	}))
	defer srv.Close()
	_, err := newClient(t, srv.URL, "").DownloadArtifacts(context.Background(), "job_x", &bytes.Buffer{})
	if err == nil {
		t.Error("a truncated download succeeded")
	}
}

// TestReplyAndFollowTheNextTurn: a reply to an ended job gives the seq to
// follow from; following from it shows the message and the next turn to
// its end.
func TestReplyAndFollowTheNextTurn(t *testing.T) {
	e := apitest.New(t, api.Config{})
	c := newClient(t, e.URL, apitest.Token)
	id := e.Submit("x").ID                 // 1
	e.Start(id)                            // 2
	e.Finish(id, store.StatusComplete, "") // 3
	j, after, err := c.Reply(context.Background(), id, "and now the tests")
	if err != nil || j.Status != "pending" || j.Turn != 2 || after != 3 {
		t.Fatalf("reply: %+v, after %d, %v", j, after, err)
	}
	var types []string
	err = c.Follow(context.Background(), id, after, func(ev wire.Event) error {
		types = append(types, ev.Type)
		if ev.Seq == 5 { // the pending state: the next turn runs
			e.Start(id)
			e.Finish(id, store.StatusComplete, "")
		}
		return nil
	})
	if got := strings.Join(types, " "); err != nil || got != "message state state state" {
		t.Fatalf("follow: %s, %v", got, err)
	}
	if _, _, err := c.Reply(context.Background(), id, " "); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("a blank reply: %v", err)
	}
}

// TestEventStatusAgrees: the client's reading of a state event is the
// server's: its type, its status, which statuses are final.
func TestEventStatusAgrees(t *testing.T) {
	for _, st := range []store.Status{store.StatusPending, store.StatusRunning, store.StatusComplete, store.StatusError, store.StatusCanceled} {
		typ, payload, err := event.Marshal(event.State{Status: st, Attempt: 1})
		if err != nil {
			t.Fatal(err)
		}
		got, final := client.EventStatus(wire.Event{Type: typ, Payload: payload})
		if got != string(st) || final != st.Final() {
			t.Errorf("%s: EventStatus = %q, %v; want %q, %v", st, got, final, st, st.Final())
		}
	}
	if _, final := client.EventStatus(wire.Event{Type: "log", Payload: []byte(`{"status":"complete"}`)}); final {
		t.Error("a log event read as a final state")
	}
}

func TestDeleteOnceSaysWhetherItAlreadyWas(t *testing.T) {
	e := apitest.New(t, api.Config{})
	c := newClient(t, e.URL, apitest.Token)
	ctx := context.Background()
	sr, err := c.Submit(ctx, wire.SubmitRequest{Task: "hello"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, sr.JobID); err != nil {
		t.Fatal(err)
	}
	for _, already := range []bool{false, true} {
		d, err := c.DeleteOnce(ctx, sr.JobID)
		if err != nil || d.Already != already || d.JobID != sr.JobID || d.DeletedAt.IsZero() {
			t.Fatalf("delete (already %v): %+v %v", already, d, err)
		}
		b, _ := json.Marshal(d)
		if strings.Contains(string(b), "lready") {
			t.Fatalf("a deletion marshals as the job alone: %s", b)
		}
	}
}
