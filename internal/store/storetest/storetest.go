// Package storetest is the conformance suite of store.Store: every
// implementation runs Run from its own tests and so keeps the rules of the
// store package's contract, including durability across a close and reopen.
package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

// Opener opens the store called name. The first time the suite opens a name
// the store must be empty; the suite opens a name again only after closing
// the previous store of that name, and then expects the same data back.
// Names are unique within one Run and made of [A-Za-z0-9_].
type Opener func(t *testing.T, name string) store.Store

// Run runs the suite, each test in its own t.Run with fresh stores.
func Run(t *testing.T, open Opener) {
	h := &harness{open: open}
	tests := []struct {
		name string
		fn   func(*testing.T, *harness)
	}{
		{"CreateGet", testCreateGet},
		{"UpdateRoundTrip", testUpdateRoundTrip},
		{"NotFound", testNotFound},
		{"Idempotency", testIdempotency},
		{"IdempotencyConcurrent", testIdempotencyConcurrent},
		{"ListOrder", testListOrder},
		{"ListPaging", testListPaging},
		{"ListStatus", testListStatus},
		{"ListQuery", testListQuery},
		{"UpdateConcurrent", testUpdateConcurrent},
		{"UpdateAbort", testUpdateAbort},
		{"UpdateLogged", testUpdateLogged},
		{"ClaimOrder", testClaimOrder},
		{"ClaimConcurrent", testClaimConcurrent},
		{"Heartbeat", testHeartbeat},
		{"Release", testRelease},
		{"RequeueExpired", testRequeueExpired},
		{"Events", testEvents},
		{"EventsConcurrent", testEventsConcurrent},
		{"LastSeq", testLastSeq},
		{"CountByStatus", testCountByStatus},
		{"QueuePosition", testQueuePosition},
		{"Workers", testWorkers},
		{"DeletedAt", testDeletedAt},
		{"EndedBefore", testEndedBefore},
		{"EndedBeforeLimit", testEndedBeforeLimit},
		{"Reopen", testReopen},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// harness opens stores for the tests and closes them at the end.
type harness struct {
	open Opener
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// name is the store name of test t plus suffix.
func (h *harness) name(t *testing.T, suffix string) string {
	return unsafeName.ReplaceAllString(t.Name()+"_"+suffix, "_")
}

// fresh opens an empty store that is closed when t ends.
func (h *harness) fresh(t *testing.T) store.Store {
	t.Helper()
	s, _ := h.reopenable(t, "db")
	return s
}

// reopenable opens store name and returns it with a close function that
// may be called early; it is also called when t ends.
func (h *harness) reopenable(t *testing.T, name string) (store.Store, func()) {
	t.Helper()
	s := h.open(t, h.name(t, name))
	var once sync.Once
	closeFn := func() {
		once.Do(func() {
			if err := s.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
	t.Cleanup(closeFn)
	return s, closeFn
}

// base is a start time for the jobs of a test, at microsecond precision so
// that stores keeping microseconds round-trip it exactly.
func base() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// newJob is a pending job created at t.
func newJob(id string, created time.Time) store.Job {
	return store.Job{
		ID: id, Task: "task " + id, Status: store.StatusPending, MaxAttempts: 3,
		CreatedAt: created, UpdatedAt: created,
	}
}

func jobID(i int) string { return fmt.Sprintf("job-%04d", i) }

// create stores j and fails the test unless it was created.
func create(t *testing.T, s store.Store, j store.Job) store.Job {
	t.Helper()
	got, created, err := s.CreateJob(t.Context(), j)
	if err != nil || !created {
		t.Fatalf("CreateJob(%s) = created %v, %v; want created", j.ID, created, err)
	}
	return got
}

// createN stores n pending jobs created 1ms apart, oldest first.
func createN(t *testing.T, s store.Store, n int) []store.Job {
	t.Helper()
	b := base()
	jobs := make([]store.Job, n)
	for i := range jobs {
		jobs[i] = create(t, s, newJob(jobID(i), b.Add(time.Duration(i)*time.Millisecond)))
	}
	return jobs
}

func get(t *testing.T, s store.Store, id string) store.Job {
	t.Helper()
	j, err := s.GetJob(t.Context(), id)
	if err != nil {
		t.Fatalf("GetJob(%s): %v", id, err)
	}
	return j
}

// wantErr fails the test unless errors.Is(err, want).
func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want %v", what, err, want)
	}
}

// sameJob fails the test unless got equals want: times to the microsecond,
// JSON by value, nil and empty metadata alike.
func sameJob(t *testing.T, what string, got, want store.Job) {
	t.Helper()
	g, w := got, want
	w.Turn = max(w.Turn, 1) // a job is created in its first turn
	for _, p := range [][2]*time.Time{
		{&g.CreatedAt, &w.CreatedAt}, {&g.UpdatedAt, &w.UpdatedAt}, {&g.StartedAt, &w.StartedAt},
		{&g.EndedAt, &w.EndedAt}, {&g.LeaseUntil, &w.LeaseUntil}, {&g.DeletedAt, &w.DeletedAt},
	} {
		if !sameTime(*p[0], *p[1]) {
			t.Errorf("%s: time %v, want %v", what, *p[0], *p[1])
		}
		*p[0], *p[1] = time.Time{}, time.Time{}
	}
	if !sameJSON(g.Sandbox, w.Sandbox) {
		t.Errorf("%s: sandbox %s, want %s", what, g.Sandbox, w.Sandbox)
	}
	g.Sandbox, w.Sandbox = nil, nil
	if len(g.Metadata) == 0 && len(w.Metadata) == 0 {
		g.Metadata, w.Metadata = nil, nil
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, g, w)
	}
}

func sameTime(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero() == b.IsZero()
	}
	d := a.Sub(b)
	return d < time.Microsecond && d > -time.Microsecond
}

// sameJSON compares two JSON texts by value; empty equals null.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if len(a) > 0 && json.Unmarshal(a, &x) != nil || len(b) > 0 && json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// parallel runs fn(i) for i in [0, n) on n goroutines and waits.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { fn(i) })
	}
	wg.Wait()
}
