package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

func appendEvent(t *testing.T, s store.Store, jobID, typ string, payload string) store.Event {
	t.Helper()
	ev, err := s.AppendEvent(t.Context(), jobID, typ, json.RawMessage(payload))
	if err != nil {
		t.Fatalf("AppendEvent(%s): %v", jobID, err)
	}
	return ev
}

// allEvents pages through a job's log, limit events at a time.
func allEvents(t *testing.T, s store.Store, jobID string, limit int) []store.Event {
	t.Helper()
	var out []store.Event
	for {
		evs, err := s.Events(t.Context(), jobID, int64(len(out)), limit)
		if err != nil {
			t.Fatalf("Events(%s, %d, %d): %v", jobID, len(out), limit, err)
		}
		if len(evs) > limit {
			t.Fatalf("Events(limit %d) returned %d", limit, len(evs))
		}
		if len(evs) == 0 {
			return out
		}
		out = append(out, evs...)
	}
}

// checkSeqs fails the test unless evs are numbered 1, 2, … in order.
func checkSeqs(t *testing.T, evs []store.Event) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d, want %d", i, ev.Seq, i+1)
		}
	}
}

func sameEvent(t *testing.T, got, want store.Event) {
	t.Helper()
	if got.JobID != want.JobID || got.Seq != want.Seq || got.Type != want.Type ||
		!sameTime(got.Time, want.Time) || !sameJSON(got.Payload, want.Payload) {
		t.Errorf("event:\n got %+v %s\nwant %+v %s", got, got.Payload, want, want.Payload)
	}
}

func testEvents(t *testing.T, h *harness) {
	s := h.fresh(t)
	createN(t, s, 2)
	a, b := jobID(0), jobID(1)
	if evs, err := s.Events(t.Context(), a, 0, 10); err != nil || len(evs) != 0 {
		t.Errorf("Events of a job without events = %v, %v; want none", evs, err)
	}
	start := time.Now()
	var want []store.Event
	for i := range 25 {
		want = append(want, appendEvent(t, s, a, "log", fmt.Sprintf(`{"i": %d, "s": "ü\n"}`, i)))
	}
	appendEvent(t, s, b, "state", `{}`)
	if ev := want[0]; ev.JobID != a || ev.Type != "log" || ev.Time.Before(start.Add(-time.Second)) {
		t.Errorf("AppendEvent returned %+v", ev)
	}
	checkSeqs(t, want)
	for _, limit := range []int{1, 7, 25, 100} {
		got := allEvents(t, s, a, limit)
		if len(got) != len(want) {
			t.Fatalf("paging by %d: %d events, want %d", limit, len(got), len(want))
		}
		for i := range got {
			sameEvent(t, got[i], want[i])
		}
	}
	if evs, err := s.Events(t.Context(), a, 20, 3); err != nil || len(evs) != 3 || evs[0].Seq != 21 {
		t.Errorf("Events(after 20, limit 3) = %d events, %v; want seqs 21-23", len(evs), err)
	}
	if evs := allEvents(t, s, b, 10); len(evs) != 1 || evs[0].Seq != 1 {
		t.Errorf("second job's log: %+v, want one event with seq 1", evs)
	}
}

// testLastSeq: LastSeq follows the appends of its own job only, is 0 for
// a job without events and ErrNotFound for an unknown one.
func testLastSeq(t *testing.T, h *harness) {
	s := h.fresh(t)
	createN(t, s, 2)
	a, b := jobID(0), jobID(1)
	if seq, err := s.LastSeq(t.Context(), a); err != nil || seq != 0 {
		t.Errorf("LastSeq of a job without events = %d, %v; want 0", seq, err)
	}
	for i := range 12 {
		appendEvent(t, s, a, "log", fmt.Sprint(i))
	}
	appendEvent(t, s, b, "log", "0")
	for id, want := range map[string]int64{a: 12, b: 1} {
		if seq, err := s.LastSeq(t.Context(), id); err != nil || seq != want {
			t.Errorf("LastSeq(%s) = %d, %v; want %d", id, seq, err, want)
		}
	}
	if evs, err := s.Events(t.Context(), a, 12-5, 100); err != nil || len(evs) != 5 || evs[4].Seq != 12 {
		t.Errorf("the last 5 events after LastSeq: %d, %v", len(evs), err)
	}
	if _, err := s.LastSeq(t.Context(), "no-such-job"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LastSeq of an unknown job: %v; want ErrNotFound", err)
	}
}

func testEventsConcurrent(t *testing.T, h *harness) {
	s := h.fresh(t)
	createN(t, s, 1)
	const writers, each = 20, 10
	seqs := make([][]int64, writers)
	parallel(writers, func(w int) {
		for i := range each {
			ev, err := s.AppendEvent(t.Context(), jobID(0), "log", json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)))
			if err != nil {
				t.Errorf("AppendEvent: %v", err)
				return
			}
			seqs[w] = append(seqs[w], ev.Seq)
		}
	})
	all := slices.Concat(seqs...)
	slices.Sort(all)
	for i, seq := range all {
		if seq != int64(i+1) {
			t.Fatalf("AppendEvent returned seqs %v, want 1..%d once each", all, writers*each)
		}
	}
	evs := allEvents(t, s, jobID(0), 50)
	if len(evs) != writers*each {
		t.Fatalf("log has %d events, want %d", len(evs), writers*each)
	}
	checkSeqs(t, evs)
}

// testReopen closes a store and opens it again: everything written is there,
// and the log continues where it stopped.
func testReopen(t *testing.T, h *harness) {
	s, closeFirst := h.reopenable(t, "db")
	jobs := createN(t, s, 5)
	var evs []store.Event
	for i := range 3 {
		evs = append(evs, appendEvent(t, s, jobs[0].ID, "log", fmt.Sprint(i)))
	}
	claimed := claim(t, s, "w", time.Hour)
	closeFirst()

	s2, _ := h.reopenable(t, "db")
	jobs[0] = claimed
	for _, j := range jobs {
		sameJob(t, "after reopen", get(t, s2, j.ID), j)
	}
	got := allEvents(t, s2, jobs[0].ID, 10)
	if len(got) != len(evs) {
		t.Fatalf("after reopen: %d events, want %d", len(got), len(evs))
	}
	for i := range got {
		sameEvent(t, got[i], evs[i])
	}
	if ev := appendEvent(t, s2, jobs[0].ID, "log", `"more"`); ev.Seq != 4 {
		t.Errorf("after reopen the next event has seq %d, want 4", ev.Seq)
	}
}

// testUpdateLogged: UpdateJobLogged saves the job and appends its entries
// in one go, numbered after the log's last event; when fn fails, or an
// entry is not JSON, neither is stored.
func testUpdateLogged(t *testing.T, h *harness) {
	s := h.fresh(t)
	create(t, s, newJob("job", base()))
	appendEvent(t, s, "job", "state", `{"status":"complete"}`)
	j, evs, err := s.UpdateJobLogged(t.Context(), "job", func(j *store.Job) ([]store.Entry, error) {
		j.Status, j.Turn = store.StatusPending, 2
		return []store.Entry{{Type: "message", Payload: json.RawMessage(`{"text":"more","turn":2}`)},
			{Type: "state", Payload: json.RawMessage(`{"status":"pending"}`)}}, nil
	})
	if err != nil || j.Status != store.StatusPending || j.Turn != 2 {
		t.Fatalf("UpdateJobLogged = %+v, %v", j, err)
	}
	if len(evs) != 2 || evs[0].Seq != 2 || evs[1].Seq != 3 || evs[0].Type != "message" || evs[0].JobID != "job" {
		t.Fatalf("UpdateJobLogged appended %+v", evs)
	}
	all := allEvents(t, s, "job", 10)
	checkSeqs(t, all)
	sameEvent(t, all[1], evs[0])
	sameEvent(t, all[2], evs[1])
	if got := get(t, s, "job"); got.Status != store.StatusPending || got.Turn != 2 {
		t.Errorf("job after UpdateJobLogged: %s turn %d", got.Status, got.Turn)
	}
	errStop := errors.New("stop")
	for name, fn := range map[string]func(*store.Job) ([]store.Entry, error){
		"fn fails": func(j *store.Job) ([]store.Entry, error) {
			j.Turn = 9
			return []store.Entry{{Type: "log", Payload: json.RawMessage(`{}`)}}, errStop
		},
		"entry not JSON": func(j *store.Job) ([]store.Entry, error) {
			j.Turn = 9
			return []store.Entry{{Type: "log", Payload: json.RawMessage(`{}`)}, {Type: "log", Payload: json.RawMessage(`{oops`)}}, nil
		},
	} {
		if _, _, err := s.UpdateJobLogged(t.Context(), "job", fn); err == nil {
			t.Errorf("%s: no error", name)
		}
		if got := get(t, s, "job"); got.Turn != 2 || len(allEvents(t, s, "job", 10)) != 3 {
			t.Errorf("%s: stored turn %d and %d events", name, got.Turn, len(allEvents(t, s, "job", 10)))
		}
	}
}
