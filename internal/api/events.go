package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/wire"
)

const (
	defaultEventLimit = 100
	maxEventLimit     = 1000
	sseBatch          = 500
)

// events handles GET /v1/jobs/{id}/events: JSON pages (?after=&limit=), or
// with Accept: text/event-stream a live SSE stream.
func (s *server) events(w http.ResponseWriter, r *http.Request) error {
	after, err := queryInt(r, "after", 0)
	if err != nil {
		return err
	}
	if wantsSSE(r) {
		return s.streamEvents(w, r, after)
	}
	limit, err := queryInt(r, "limit", defaultEventLimit)
	if err != nil {
		return err
	}
	if limit < 1 || limit > maxEventLimit {
		return errorf(http.StatusUnprocessableEntity, wire.CodeValidation, "limit must be between 1 and %d", maxEventLimit)
	}
	evs, err := s.svc.Events(r.Context(), pathID(r), after, int(limit))
	if err != nil {
		return err
	}
	page := wire.EventPage{Events: make([]wire.Event, 0, len(evs)), NextAfter: after, HasMore: len(evs) == int(limit)}
	for _, e := range evs {
		page.Events = append(page.Events, eventDTO(e))
		page.NextAfter = e.Seq
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func wantsSSE(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(v, "text/event-stream") {
			return true
		}
	}
	return false
}

// streamEvents sends the job's events after seq after (or after the
// Last-Event-ID header, which wins, as browsers send it on reconnect) and
// follows the log until the job's final state event has been sent.
func (s *server) streamEvents(w http.ResponseWriter, r *http.Request, after int64) error {
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return badRequest("Last-Event-ID must be an event seq, not %q", v)
		}
		after = n
	}
	id := pathID(r)
	if _, err := s.svc.Get(r.Context(), id); err != nil {
		return err // 404 before the stream starts
	}
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		return errorf(http.StatusServiceUnavailable, wire.CodeUnavailable, "too many open event streams (%d); retry later or read JSON pages", s.cfg.MaxStreams)
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	st := &sseStream{s: s, w: w, rc: http.NewResponseController(w), id: id, after: after, lastWrite: time.Now()}
	if err := st.flush(); err != nil {
		return nil
	}
	err := st.run(r.Context())
	if r.Context().Err() != nil {
		return nil // the client left; not an error
	}
	return err
}

// sseStream is one client's live view of a job's log.
type sseStream struct {
	s         *server
	w         http.ResponseWriter
	rc        *http.ResponseController
	id        string
	after     int64
	lastWrite time.Time
	// endedSeen is when the job was first seen ended with nothing more to
	// send. The status is recorded before the final state event is
	// appended, so the stream waits a poll interval for that event before
	// ending without it.
	endedSeen time.Time
}

func (st *sseStream) run(ctx context.Context) error {
	for {
		evs, err := st.s.svc.Events(ctx, st.id, st.after, sseBatch)
		if err != nil {
			return err
		}
		done, err := st.send(ctx, evs)
		if done || err != nil {
			return err
		}
		if len(evs) == sseBatch {
			continue
		}
		if done, err := st.ended(ctx); done || err != nil {
			return err
		}
		if err := st.s.svc.WaitEvents(ctx, st.id, st.after, st.s.cfg.Poll); err != nil {
			return err
		}
		if err := st.keepAlive(); err != nil {
			return err
		}
	}
}

// send writes evs up to and including a final state event, the stream's
// last unless the job's next turn follows it; done reports that it went
// out.
func (st *sseStream) send(ctx context.Context, evs []store.Event) (done bool, err error) {
	for _, e := range evs {
		data, err := json.Marshal(eventDTO(e))
		if err != nil {
			return false, fmt.Errorf("encode event %d: %w", e.Seq, err)
		}
		if _, err := fmt.Fprintf(st.w, "id: %d\nevent: %s\ndata: %s\n\n", e.Seq, sseField(e.Type), data); err != nil {
			return false, err
		}
		st.after = e.Seq
		if isFinalState(e) {
			next, err := st.nextTurn(ctx, e.Seq)
			if err != nil {
				return false, err
			}
			if done = !next; done {
				break
			}
		}
	}
	if len(evs) > 0 {
		st.lastWrite = time.Now()
		return done, st.flush()
	}
	return false, nil
}

// nextTurn reports whether the job's log goes on past its final state
// event at seq with the job's next turn: a follow-up message, or the
// pending state that starts the turn, comes within a few events (only
// the host's own, such as git's, may come between).
func (st *sseStream) nextTurn(ctx context.Context, seq int64) (bool, error) {
	evs, err := st.s.svc.Events(ctx, st.id, seq, 16)
	for _, e := range evs {
		state, isState := event.As[event.State](e.Type, e.Payload)
		if e.Type == event.TypeMessage || isState && state.Status == store.StatusPending {
			return true, err
		}
	}
	return false, err
}

// finalEventLag is how long a stream that saw its job ended waits, at the
// least, for the final state event: the worker records the status and the
// event in two writes, and a busy machine can pause between them.
const finalEventLag = time.Second

// ended reports whether the stream should end with nothing more to send:
// the job has ended and its final state event is the last one sent (a
// resume after it), or the job has been seen ended for a poll interval
// (finalEventLag at least) without its final state event arriving (it must
// not hold the stream open).
func (st *sseStream) ended(ctx context.Context) (bool, error) {
	j, err := st.s.svc.Get(ctx, st.id)
	if err != nil || !j.Status.Final() {
		return false, err
	}
	if !st.endedSeen.IsZero() {
		return time.Since(st.endedSeen) >= max(st.s.cfg.Poll, finalEventLag), nil
	}
	st.endedSeen = time.Now()
	if st.after == 0 {
		return false, nil
	}
	last, err := st.s.svc.Events(ctx, st.id, st.after-1, 1)
	if err != nil {
		return false, err
	}
	return len(last) == 1 && isFinalState(last[0]), nil
}

func (st *sseStream) keepAlive() error {
	if time.Since(st.lastWrite) < st.s.cfg.KeepAlive {
		return nil
	}
	if _, err := fmt.Fprint(st.w, ": keep-alive\n\n"); err != nil {
		return err
	}
	st.lastWrite = time.Now()
	return st.flush()
}

func (st *sseStream) flush() error { return st.rc.Flush() }

// isFinalState reports whether e records the job reaching an end state.
func isFinalState(e store.Event) bool {
	st, ok := event.As[event.State](e.Type, e.Payload)
	return ok && st.Status.Final()
}

// sseField keeps an event type on one SSE line.
func sseField(s string) string {
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}
