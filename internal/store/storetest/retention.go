package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

// endedJob is a job that ended in status at ended.
func endedJob(id string, status store.Status, ended time.Time) store.Job {
	j := newJob(id, ended.Add(-time.Minute))
	j.Status, j.StartedAt, j.EndedAt = status, ended.Add(-time.Second), ended
	return j
}

// testDeletedAt: DeletedAt is set, kept by other writes, survives a reopen,
// and can be cleared.
func testDeletedAt(t *testing.T, h *harness) {
	s, closeFirst := h.reopenable(t, "db")
	b := base()
	create(t, s, endedJob("job", store.StatusComplete, b))
	deleted := b.Add(time.Hour + 321*time.Microsecond)
	want, err := s.UpdateJob(t.Context(), "job", func(j *store.Job) error {
		j.DeletedAt = deleted
		return nil
	})
	if err != nil || !sameTime(want.DeletedAt, deleted) {
		t.Fatalf("UpdateJob(DeletedAt) = %v, %v; want %v", want.DeletedAt, err, deleted)
	}
	sameJob(t, "GetJob after delete", get(t, s, "job"), want)
	want, err = s.UpdateJob(t.Context(), "job", func(j *store.Job) error {
		j.Result = "other write"
		return nil
	})
	if err != nil || !sameTime(want.DeletedAt, deleted) {
		t.Errorf("another update: DeletedAt %v, %v; want %v kept", want.DeletedAt, err, deleted)
	}
	closeFirst()

	s2, _ := h.reopenable(t, "db")
	sameJob(t, "GetJob after reopen", get(t, s2, "job"), want)
	cleared, err := s2.UpdateJob(t.Context(), "job", func(j *store.Job) error {
		j.DeletedAt = time.Time{}
		return nil
	})
	if err != nil || !cleared.DeletedAt.IsZero() || !get(t, s2, "job").DeletedAt.IsZero() {
		t.Errorf("clearing DeletedAt: %v, %v; want zero", get(t, s2, "job").DeletedAt, err)
	}
}

// testEndedBefore: only ended, undeleted jobs that ended strictly before the
// time, oldest first, ties by ID.
func testEndedBefore(t *testing.T, h *harness) {
	s := h.fresh(t)
	b := base()
	cut := b.Add(-time.Hour)
	gone := endedJob("deleted-5h", store.StatusComplete, b.Add(-5*time.Hour))
	gone.DeletedAt = b.Add(-4 * time.Hour)
	odd := endedJob("running-4h", store.StatusRunning, b.Add(-4*time.Hour)) // EndedAt without an end state
	for _, j := range []store.Job{
		gone, odd,
		endedJob("ended-3h", store.StatusComplete, b.Add(-3*time.Hour)),
		endedJob("ended-2h-b", store.StatusCanceled, b.Add(-2*time.Hour)),
		endedJob("ended-2h-a", store.StatusError, b.Add(-2*time.Hour)),
		endedJob("ended-at-cut", store.StatusComplete, cut),
		endedJob("ended-now", store.StatusComplete, b),
		newJob("pending", b.Add(-6*time.Hour)),
	} {
		create(t, s, j)
	}
	want := []string{"ended-3h", "ended-2h-a", "ended-2h-b"}
	if got := endedBefore(t, s, cut, 100); !slices.Equal(got, want) {
		t.Errorf("EndedBefore = %v, want %v", got, want)
	}
	_, err := s.UpdateJob(t.Context(), "ended-3h", func(j *store.Job) error {
		j.DeletedAt = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := endedBefore(t, s, cut, 100); !slices.Equal(got, want[1:]) {
		t.Errorf("after deleting ended-3h: EndedBefore = %v, want %v", got, want[1:])
	}
	if got := endedBefore(t, s, b.Add(-10*time.Hour), 100); len(got) != 0 {
		t.Errorf("EndedBefore before every job = %v, want none", got)
	}
}

func testEndedBeforeLimit(t *testing.T, h *harness) {
	s := h.fresh(t)
	b := base()
	var all []string
	for i := range 5 {
		j := endedJob(jobID(i), store.StatusComplete, b.Add(time.Duration(i)*time.Second))
		create(t, s, j)
		all = append(all, j.ID)
	}
	if got := endedBefore(t, s, b.Add(time.Hour), 2); !slices.Equal(got, all[:2]) {
		t.Errorf("EndedBefore(limit 2) = %v, want %v", got, all[:2])
	}
	if got := endedBefore(t, s, b.Add(time.Hour), 0); !slices.Equal(got, all) {
		t.Errorf("EndedBefore(limit 0: the default) = %v, want %v", got, all)
	}
}

// endedBefore calls EndedBefore and returns the IDs.
func endedBefore(t *testing.T, s store.Store, before time.Time, limit int) []string {
	t.Helper()
	jobs, err := s.EndedBefore(t.Context(), before, limit)
	if err != nil {
		t.Fatalf("EndedBefore: %v", err)
	}
	ids := []string{}
	for _, j := range jobs {
		if !j.Status.Final() || !j.DeletedAt.IsZero() || !j.EndedAt.Before(before) {
			t.Errorf("EndedBefore(%v) returned job %s: %s, ended %v, deleted %v", before, j.ID, j.Status, j.EndedAt, j.DeletedAt)
		}
		ids = append(ids, j.ID)
	}
	return ids
}
