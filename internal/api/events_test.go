package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/api/apitest"
	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

func TestEventPages(t *testing.T) {
	e := apitest.New(t, api.Config{})
	id := e.Submit("x").ID // seq 1: state pending
	for i := range 4 {
		e.Emit(id, event.Output{Stream: "stdout", Text: fmt.Sprint(i)})
	}
	resp, b := do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/events?after=2&limit=2"})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	p := decode[wire.EventPage](t, b)
	if len(p.Events) != 2 || p.Events[0].Seq != 3 || p.Events[1].Seq != 4 || p.NextAfter != 4 || !p.HasMore {
		t.Fatalf("page = %+v", p)
	}
	if ev := p.Events[0]; ev.Type != "output" || ev.JobID != id || ev.Time.IsZero() || string(ev.Payload) != `{"stream":"stdout","text":"1"}` {
		t.Errorf("event = %+v (payload %s)", ev, ev.Payload)
	}
	_, b = do(t, e, req{method: "GET", path: "/v1/jobs/" + id + "/events?after=5"})
	if p := decode[wire.EventPage](t, b); len(p.Events) != 0 || p.NextAfter != 5 || p.HasMore {
		t.Errorf("empty page = %+v", p)
	}
}

// sseEvent is one event read off the wire.
type sseEvent struct {
	id, event, data string
}

// sseStream reads a whole stream until the server ends it; comments are
// passed to onComment.
type sseStream struct {
	t      *testing.T
	sc     *bufio.Scanner
	resp   *http.Response
	cancel context.CancelFunc
}

func openStream(t *testing.T, e *apitest.Env, path string, hdr map[string]string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	r, _ := http.NewRequestWithContext(ctx, "GET", e.URL+path, nil)
	r.Header.Set("Authorization", "Bearer "+apitest.Token)
	r.Header.Set("Accept", "text/event-stream")
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &sseStream{t: t, sc: bufio.NewScanner(resp.Body), resp: resp, cancel: cancel}
}

// next returns the next event, or ok=false when the stream ended. Comments
// are returned as events with only data set to the comment.
func (s *sseStream) next() (ev sseEvent, ok bool) {
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if ev != (sseEvent{}) {
				return ev, true
			}
		case strings.HasPrefix(line, ":"):
			return sseEvent{data: line}, true
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			ev.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		default:
			s.t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if err := s.sc.Err(); err != nil {
		s.t.Fatalf("stream broke (or did not end in time): %v", err)
	}
	return ev, false
}

// rest reads events until the server ends the stream and returns their seqs,
// checking each event's fields agree.
func (s *sseStream) rest() []int64 {
	var seqs []int64
	for {
		ev, ok := s.next()
		if !ok {
			return seqs
		}
		if strings.HasPrefix(ev.data, ":") {
			continue
		}
		var got wire.Event
		if err := json.Unmarshal([]byte(ev.data), &got); err != nil {
			s.t.Fatalf("data %q: %v", ev.data, err)
		}
		if strconv.FormatInt(got.Seq, 10) != ev.id || got.Type != ev.event {
			s.t.Errorf("id %s / event %s disagree with data %s", ev.id, ev.event, ev.data)
		}
		seqs = append(seqs, got.Seq)
	}
}

func TestStreamResumesAndEnds(t *testing.T) {
	for _, how := range []string{"Last-Event-ID", "after"} {
		t.Run(how, func(t *testing.T) {
			e := apitest.New(t, api.Config{})
			id := e.Submit("x").ID                                // seq 1
			e.Start(id)                                           // seq 2
			e.Emit(id, event.Command{Command: "ls"})              // 3
			e.Emit(id, event.Output{Stream: "stdout", Text: "a"}) // 4
			path, hdr := "/v1/jobs/"+id+"/events", map[string]string{"Last-Event-ID": "3"}
			if how == "after" {
				path, hdr = path+"?after=3", nil
			}
			s := openStream(t, e, path, hdr)
			if ev, ok := s.next(); !ok || ev.id != "4" {
				t.Fatalf("first event %+v, want seq 4", ev)
			}
			e.Emit(id, event.Output{Stream: "stdout", Text: "b"}) // 5
			e.Finish(id, store.StatusComplete, "")                // 6
			e.Emit(id, event.Log{Message: "after the end"})       // 7: not sent, the stream ends at 6
			got := s.rest()
			if len(got) != 2 || got[0] != 5 || got[1] != 6 {
				t.Errorf("events after 4: %v, want [5 6] and the end of the stream", got)
			}
		})
	}
}

func TestStreamResumedAfterTheEndEndsAtOnce(t *testing.T) {
	e := apitest.New(t, api.Config{Poll: time.Hour})
	id := e.Submit("x").ID
	e.Finish(id, store.StatusCanceled, "canceled by request") // seq 2
	s := openStream(t, e, "/v1/jobs/"+id+"/events", map[string]string{"Last-Event-ID": "2"})
	if got := s.rest(); len(got) != 0 {
		t.Errorf("events %v, want none", got)
	}
	s = openStream(t, e, "/v1/jobs/"+id+"/events", nil)
	if got := s.rest(); len(got) != 2 {
		t.Errorf("events %v, want [1 2]", got)
	}
}

// TestStreamEndsForJobEndedWithoutFinalEvent: a job whose final state event
// is missing must not hold its followers forever.
func TestStreamEndsForJobEndedWithoutFinalEvent(t *testing.T) {
	e := apitest.New(t, api.Config{})
	id := e.Submit("x").ID
	e.SetStatus(id, store.StatusError)
	s := openStream(t, e, "/v1/jobs/"+id+"/events", nil)
	if got := s.rest(); len(got) != 1 {
		t.Errorf("events %v, want [1]", got)
	}
}

// TestStreamWaitsForLaggingFinalEvent: the worker records a job's end and
// its final state event in two writes; a stream that sees the end first
// waits a moment for the event, even with a fast poll.
func TestStreamWaitsForLaggingFinalEvent(t *testing.T) {
	e, id, s := followNewJob(t)
	e.SetStatus(id, store.StatusComplete)
	time.Sleep(300 * time.Millisecond) // the pause between the writes: 30 polls
	e.Emit(id, event.State{Status: store.StatusComplete})
	if got := s.rest(); len(got) != 1 || got[0] != 2 {
		t.Errorf("events after the first %v, want [2]: the final state event", got)
	}
}

func TestStreamKeepAlive(t *testing.T) {
	e := apitest.New(t, api.Config{KeepAlive: time.Millisecond, Poll: 5 * time.Millisecond})
	id := e.Submit("x").ID
	s := openStream(t, e, "/v1/jobs/"+id+"/events", map[string]string{"Last-Event-ID": "1"})
	ev, ok := s.next()
	if !ok || ev.data != ": keep-alive" {
		t.Fatalf("got %+v, want a keep-alive comment", ev)
	}
	e.Finish(id, store.StatusComplete, "")
	if got := s.rest(); len(got) != 1 || got[0] != 2 {
		t.Errorf("events %v, want [2]", got)
	}
}

func TestStreamStopsWhenClientLeaves(t *testing.T) {
	e, _, s := followNewJob(t)
	s.cancel()
	e.Server.Close() // waits for the handler: it must notice the client left
}

// followNewJob submits a job and follows its events, past the first.
func followNewJob(t *testing.T) (*apitest.Env, string, *sseStream) {
	t.Helper()
	e := apitest.New(t, api.Config{})
	id := e.Submit("x").ID
	s := openStream(t, e, "/v1/jobs/"+id+"/events", nil)
	if _, ok := s.next(); !ok {
		t.Fatal("no first event")
	}
	return e, id, s
}

func TestStreamsAreCapped(t *testing.T) {
	e := apitest.New(t, api.Config{MaxStreams: 1, Poll: time.Hour})
	id := e.Submit("x").ID
	first := openStream(t, e, "/v1/jobs/"+id+"/events", nil)
	first.next() // the stream is open and counted
	r, _ := http.NewRequest("GET", e.URL+"/v1/jobs/"+id+"/events", nil)
	r.Header.Set("Authorization", "Bearer "+apitest.Token)
	r.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("second stream: %d, want 503", resp.StatusCode)
	}
	first.cancel()
	first.resp.Body.Close()
	// Once the first stream is gone, a new one is accepted.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.DefaultClient.Do(r.Clone(context.Background()))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream slot never freed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
