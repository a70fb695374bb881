package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

func claim(t *testing.T, s store.Store, owner string, lease time.Duration) store.Job {
	t.Helper()
	j, err := s.ClaimJob(t.Context(), owner, lease)
	if err != nil {
		t.Fatalf("ClaimJob(%s): %v", owner, err)
	}
	return j
}

// checkClaimed fails the test unless j is freshly leased to owner.
func checkClaimed(t *testing.T, j store.Job, owner string, attempts int, before time.Time) {
	t.Helper()
	if j.Status != store.StatusRunning || j.LeaseOwner != owner || j.Attempts != attempts {
		t.Errorf("claimed job %s: status %s, owner %q, attempts %d; want running, %q, %d",
			j.ID, j.Status, j.LeaseOwner, j.Attempts, owner, attempts)
	}
	if !j.LeaseUntil.After(before) || j.StartedAt.IsZero() {
		t.Errorf("claimed job %s: lease until %v, started %v", j.ID, j.LeaseUntil, j.StartedAt)
	}
}

func testClaimOrder(t *testing.T, h *harness) {
	s := h.fresh(t)
	_, err := s.ClaimJob(t.Context(), "w", time.Minute)
	wantErr(t, "ClaimJob on an empty store", err, store.ErrNoJob)
	b := base()
	done := newJob("old-but-done", b.Add(-time.Hour))
	done.Status = store.StatusComplete
	create(t, s, done)
	jobs := make([]store.Job, 10)
	names := rand.Perm(len(jobs)) // IDs in another order than age
	for i := range jobs {
		jobs[i] = newJob(jobID(names[i]), b.Add(time.Duration(i)*time.Millisecond))
	}
	for _, i := range rand.Perm(len(jobs)) {
		create(t, s, jobs[i])
	}
	for i := range jobs {
		start := time.Now()
		j := claim(t, s, "w", time.Minute)
		if j.ID != jobs[i].ID {
			t.Fatalf("claim %d took %s, want the oldest pending %s", i, j.ID, jobs[i].ID)
		}
		checkClaimed(t, j, "w", 1, start)
		sameJob(t, "GetJob after claim", get(t, s, j.ID), j)
	}
	_, err = s.ClaimJob(t.Context(), "w", time.Minute)
	wantErr(t, "ClaimJob with no pending job", err, store.ErrNoJob)
}

func testClaimConcurrent(t *testing.T, h *harness) {
	s := h.fresh(t)
	createN(t, s, 50)
	var mu sync.Mutex
	claimedBy := map[string]string{}
	parallel(10, func(w int) {
		owner := fmt.Sprint("worker-", w)
		last := ""
		for {
			j, err := s.ClaimJob(t.Context(), owner, time.Minute)
			if errors.Is(err, store.ErrNoJob) {
				return
			}
			if err != nil {
				t.Errorf("ClaimJob(%s): %v", owner, err)
				return
			}
			if j.ID <= last {
				t.Errorf("%s claimed %s after %s: not oldest first", owner, j.ID, last)
			}
			last = j.ID
			mu.Lock()
			if prev, ok := claimedBy[j.ID]; ok {
				t.Errorf("job %s claimed by %s and %s", j.ID, prev, owner)
			}
			claimedBy[j.ID] = owner
			mu.Unlock()
		}
	})
	if len(claimedBy) != 50 {
		t.Errorf("%d of 50 jobs claimed", len(claimedBy))
	}
	for id, owner := range claimedBy {
		if j := get(t, s, id); j.LeaseOwner != owner || j.Attempts != 1 {
			t.Errorf("job %s: owner %q attempts %d, want %q and 1", id, j.LeaseOwner, j.Attempts, owner)
		}
	}
}

func testHeartbeat(t *testing.T, h *harness) {
	s := h.fresh(t)
	createN(t, s, 1)
	j := claim(t, s, "w", time.Minute)
	got, err := s.Heartbeat(t.Context(), j.ID, "w", time.Hour)
	if err != nil {
		t.Fatalf("Heartbeat by the owner: %v", err)
	}
	if !got.LeaseUntil.After(j.LeaseUntil.Add(50*time.Minute)) || got.LeaseOwner != "w" {
		t.Errorf("Heartbeat: lease until %v owner %q, want about an hour from now, w", got.LeaseUntil, got.LeaseOwner)
	}
	_, err = s.Heartbeat(t.Context(), j.ID, "other", time.Hour)
	wantErr(t, "Heartbeat by another owner", err, store.ErrLeaseLost)
	if _, err := s.UpdateJob(t.Context(), j.ID, func(j *store.Job) error { j.CancelRequested = true; return nil }); err != nil {
		t.Fatalf("UpdateJob: %v", err)
	}
	if got, err = s.Heartbeat(t.Context(), j.ID, "w", time.Hour); err != nil || !got.CancelRequested {
		t.Errorf("Heartbeat after a cancel: CancelRequested %v, %v; want true", got.CancelRequested, err)
	}
	if _, err := s.UpdateJob(t.Context(), j.ID, func(j *store.Job) error { j.Status = store.StatusComplete; return nil }); err != nil {
		t.Fatalf("UpdateJob: %v", err)
	}
	_, err = s.Heartbeat(t.Context(), j.ID, "w", time.Hour)
	wantErr(t, "Heartbeat of an ended job", err, store.ErrLeaseLost)
}

func testRelease(t *testing.T, h *harness) {
	s := h.fresh(t)
	createN(t, s, 1)
	first := claim(t, s, "w", time.Minute)
	wantErr(t, "Release by another owner", s.Release(t.Context(), first.ID, "other"), store.ErrLeaseLost)
	if err := s.Release(t.Context(), first.ID, "w"); err != nil {
		t.Fatalf("Release: %v", err)
	}
	j := get(t, s, first.ID)
	if j.Status != store.StatusPending || j.LeaseOwner != "" || !j.LeaseUntil.IsZero() || j.Attempts != 0 {
		t.Errorf("released job: status %s owner %q lease %v attempts %d; want pending, no lease, 0",
			j.Status, j.LeaseOwner, j.LeaseUntil, j.Attempts)
	}
	wantErr(t, "Release twice", s.Release(t.Context(), first.ID, "w"), store.ErrLeaseLost)
	again := claim(t, s, "w2", time.Minute)
	checkClaimed(t, again, "w2", 1, time.Now())
	if !sameTime(again.StartedAt, first.StartedAt) {
		t.Errorf("StartedAt moved from %v to %v on a second claim", first.StartedAt, again.StartedAt)
	}
	// A job whose cancel was requested is not handed back to run again.
	if _, err := s.UpdateJob(t.Context(), again.ID, func(j *store.Job) error { j.CancelRequested = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(t.Context(), again.ID, "w2"); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if j := get(t, s, again.ID); j.Status != store.StatusCanceled || j.EndedAt.IsZero() {
		t.Errorf("released job with a cancel requested: %s, ended %v; want canceled", j.Status, j.EndedAt)
	}
}

func testRequeueExpired(t *testing.T, h *harness) {
	s := h.fresh(t)
	b := base()
	type spec struct {
		owner       string
		lease       time.Duration
		maxAttempts int
		want        store.Status // after RequeueExpired
	}
	specs := []spec{
		{"w", time.Hour, 3, store.StatusPending},             // expired
		{"w", time.Hour, 1, store.StatusError},               // expired, out of attempts
		{"old-life", 10 * time.Hour, 3, store.StatusPending}, // reclaimed
		{"w", 10 * time.Hour, 1, store.StatusRunning},        // still leased
		{"w", time.Hour, 3, store.StatusCanceled},            // expired with a cancel requested
	}
	for i, sp := range specs {
		j := newJob(jobID(i), b.Add(time.Duration(i)*time.Millisecond))
		j.MaxAttempts = sp.maxAttempts
		create(t, s, j)
		c := claim(t, s, sp.owner, sp.lease)
		if sp.want == store.StatusCanceled {
			if _, err := s.UpdateJob(t.Context(), c.ID, func(j *store.Job) error { j.CancelRequested = true; return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	create(t, s, newJob("pending", b.Add(time.Second)))
	now := time.Now().Add(2 * time.Hour)
	before, err := s.RequeueExpired(t.Context(), now, "old-life")
	if err != nil {
		t.Fatalf("RequeueExpired: %v", err)
	}
	if len(before) != 4 {
		t.Errorf("RequeueExpired returned %d jobs, want 4", len(before))
	}
	for _, j := range before {
		if j.Status != store.StatusRunning || j.LeaseOwner == "" {
			t.Errorf("returned job %s as status %s owner %q, want it as it was (running, leased)", j.ID, j.Status, j.LeaseOwner)
		}
	}
	for i, sp := range specs {
		checkRequeued(t, get(t, s, jobID(i)), sp.want, now)
	}
	checkRequeued(t, get(t, s, "pending"), store.StatusPending, now)
}

func checkRequeued(t *testing.T, j store.Job, want store.Status, now time.Time) {
	t.Helper()
	if j.Status != want {
		t.Errorf("job %s: status %s, want %s", j.ID, j.Status, want)
	}
	switch want {
	case store.StatusPending:
		if j.LeaseOwner != "" || !j.LeaseUntil.IsZero() {
			t.Errorf("requeued job %s still leased to %q until %v", j.ID, j.LeaseOwner, j.LeaseUntil)
		}
	case store.StatusError:
		if !strings.Contains(j.Error, "lease expired after 1 attempts") || !sameTime(j.EndedAt, now) {
			t.Errorf("job %s: error %q ended %v; want the lease reason, ended %v", j.ID, j.Error, j.EndedAt, now)
		}
	}
}
