package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/wire"
)

// maxEventBytes bounds one SSE event (an output event can be large).
const maxEventBytes = 32 << 20

// EventStatus returns the job status a "state" event records, and whether
// it is a final one (complete, error, canceled).
func EventStatus(ev wire.Event) (status string, final bool) {
	var st struct {
		Status string `json:"status"`
	}
	if ev.Type != stateEvent || json.Unmarshal(ev.Payload, &st) != nil {
		return "", false
	}
	return st.Status, slices.Contains(finalStatuses, st.Status)
}

// stateEvent is the type of the events that record a job's status
// (event.TypeState), and finalStatuses its end states (store.Status.Final):
// the client reads them from the wire without the server's packages
// (TestEventStatusAgrees checks they agree).
const stateEvent = "state"

var finalStatuses = []string{"complete", "error", "canceled"}

// callbackError carries an error of Follow's callback out unchanged.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

// Follow calls fn for each event of the job with seq greater than after, as
// the server streams them, and returns nil once the job has ended and its
// final state event was the last delivered (the stream goes on past one
// when a follow-up message started the job's next turn). A dropped
// connection is resumed with Last-Event-ID, so fn sees each event once, in
// order. An error of fn stops the stream and is returned as is.
func (c *Client) Follow(ctx context.Context, id string, after int64, fn func(wire.Event) error) error {
	delay, failures := c.retryDelay(), 0
	for {
		got, final, err := c.followOnce(ctx, id, &after, fn)
		var cbErr callbackError
		var srvErr *Error
		switch {
		case errors.As(err, &cbErr):
			return cbErr.err
		case final && err == nil:
			return nil
		case final:
			// Cut right after a turn's end: done, unless the job's next
			// turn started (the stream would have gone on with it).
			if ended, gerr := c.jobEnded(ctx, id); gerr != nil || ended {
				return gerr
			}
		case errors.As(err, &srvErr) && srvErr.StatusCode < 500, ctx.Err() != nil:
			return err // 4xx will not change by retrying; 5xx may (a restart)
		case err == nil && got == 0:
			// The server ended a stream with nothing new: done if the job
			// ended (without a final state event), else reconnect.
			if ended, gerr := c.jobEnded(ctx, id); gerr != nil || ended {
				return gerr
			}
		}
		if got > 0 {
			delay, failures = c.retryDelay(), 0
		} else if failures++; failures > c.maxRetries() {
			return fmt.Errorf("follow job %s: giving up after %d attempts: %w", id, failures, err)
		}
		if err := wait(ctx, delay); err != nil {
			return err
		}
		delay = min(2*delay, 5*time.Second)
	}
}

func (c *Client) retryDelay() time.Duration {
	if c.RetryDelay > 0 {
		return c.RetryDelay
	}
	return 500 * time.Millisecond
}

func (c *Client) maxRetries() int {
	if c.MaxRetries > 0 {
		return c.MaxRetries
	}
	return 5
}

func (c *Client) jobEnded(ctx context.Context, id string) (bool, error) {
	j, err := c.Get(ctx, id)
	if err != nil {
		return false, err
	}
	return j.Status == "complete" || j.Status == "error" || j.Status == "canceled", nil
}

func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// followOnce reads one SSE connection to its end. It advances *after past
// each delivered event and reports how many it delivered and whether the
// last of them was a final state event, with the error that cut the
// connection, if one did.
func (c *Client) followOnce(ctx context.Context, id string, after *int64, fn func(wire.Event) error) (got int, final bool, err error) {
	hdr := http.Header{"Accept": {"text/event-stream"}}
	if *after > 0 {
		hdr.Set("Last-Event-ID", strconv.FormatInt(*after, 10))
	}
	resp, err := c.do(ctx, "GET", jobPath(id)+"/events", nil, hdr, http.StatusOK)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxEventBytes)
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			addField(&data, line)
			continue
		}
		if data.Len() == 0 {
			continue // a comment (keep-alive) or an event without data
		}
		ev, err := deliver(data.String(), fn)
		data.Reset()
		if err != nil {
			return got, final, err
		}
		got++
		*after = ev.Seq
		// The stream goes on past a final state event with the job's next
		// turn: only the last event delivered says whether it ended.
		_, final = EventStatus(ev)
	}
	if err := sc.Err(); err != nil {
		return got, final, fmt.Errorf("event stream of job %s: %w", id, err)
	}
	return got, final, nil
}

// addField adds the data of one SSE line; id and event are also in the
// data's JSON, and comments are skipped.
func addField(data *strings.Builder, line string) {
	v, ok := strings.CutPrefix(line, "data:")
	if !ok {
		return
	}
	if data.Len() > 0 {
		data.WriteByte('\n')
	}
	data.WriteString(strings.TrimPrefix(v, " "))
}

func deliver(data string, fn func(wire.Event) error) (wire.Event, error) {
	var ev wire.Event
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		return ev, fmt.Errorf("bad event from server: %w", err)
	}
	if err := fn(ev); err != nil {
		return ev, callbackError{err}
	}
	return ev, nil
}
