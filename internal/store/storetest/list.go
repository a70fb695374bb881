package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

var listStatuses = []store.Status{store.StatusPending, store.StatusRunning, store.StatusComplete}

// createForList stores n jobs in random order, two per timestamp (so ties
// are broken by ID), with statuses cycling through listStatuses. It returns
// them newest first, as ListJobs must.
func createForList(t *testing.T, s store.Store, n int) []store.Job {
	t.Helper()
	b := base()
	jobs := make([]store.Job, n)
	for i := range jobs {
		jobs[i] = newJob(jobID(i), b.Add(time.Duration(i/2)*time.Millisecond))
		jobs[i].Status = listStatuses[i%len(listStatuses)]
	}
	for _, i := range rand.Perm(n) {
		create(t, s, jobs[i])
	}
	slices.Reverse(jobs)
	return jobs
}

// listAll pages through ListJobs with opts and returns the IDs in order.
func listAll(t *testing.T, s store.Store, opts store.ListOptions) []string {
	t.Helper()
	var ids []string
	for range 1000 {
		page, err := s.ListJobs(t.Context(), opts)
		if err != nil {
			t.Fatalf("ListJobs(%+v): %v", opts, err)
		}
		if want := max(opts.Limit, 0); want > 0 && len(page.Jobs) > want {
			t.Fatalf("ListJobs(limit %d) returned %d jobs", want, len(page.Jobs))
		}
		if page.NextCursor != "" && len(page.Jobs) == 0 {
			t.Fatalf("ListJobs returned an empty page with a cursor")
		}
		for _, j := range page.Jobs {
			if opts.Status != "" && j.Status != opts.Status {
				t.Errorf("ListJobs(status %s) returned job %s in %s", opts.Status, j.ID, j.Status)
			}
			ids = append(ids, j.ID)
		}
		if page.NextCursor == "" {
			return ids
		}
		opts.Cursor = page.NextCursor
	}
	t.Fatalf("ListJobs never returned a last page")
	return nil
}

func ids(jobs []store.Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func testListOrder(t *testing.T, h *harness) {
	s := h.fresh(t)
	want := createForList(t, s, 20)
	page, err := s.ListJobs(t.Context(), store.ListOptions{})
	if err != nil {
		t.Fatalf("ListJobs: %v", err)
	}
	if got := ids(page.Jobs); !slices.Equal(got, ids(want)) {
		t.Errorf("ListJobs order:\n got %v\nwant %v", got, ids(want))
	}
	if page.NextCursor != "" {
		t.Errorf("a single page has NextCursor %q", page.NextCursor)
	}
	for i, j := range page.Jobs {
		sameJob(t, "listed job", j, want[i])
	}
}

func testListPaging(t *testing.T, h *harness) {
	s := h.fresh(t)
	want := ids(createForList(t, s, 250))
	for _, limit := range []int{0, 1, 7, 50, 249, 250, 1000} {
		t.Run(fmt.Sprint("limit", limit), func(t *testing.T) {
			got := listAll(t, s, store.ListOptions{Limit: limit})
			if !slices.Equal(got, want) {
				t.Errorf("paging with limit %d: gaps, duplicates or disorder:\n got %v\nwant %v",
					limit, strings.Join(got, " "), strings.Join(want, " "))
			}
		})
	}
	page, err := s.ListJobs(t.Context(), store.ListOptions{})
	if err != nil || len(page.Jobs) != 50 || page.NextCursor == "" {
		t.Errorf("default limit: %d jobs, cursor %q, %v; want 50 and a cursor", len(page.Jobs), page.NextCursor, err)
	}
}

func testListStatus(t *testing.T, h *harness) {
	s := h.fresh(t)
	all := createForList(t, s, 100)
	for _, st := range append(listStatuses, store.StatusError) {
		t.Run(string(st), func(t *testing.T) {
			var want []string
			for _, j := range all {
				if j.Status == st {
					want = append(want, j.ID)
				}
			}
			got := listAll(t, s, store.ListOptions{Status: st, Limit: 6})
			if !slices.Equal(got, want) {
				t.Errorf("status %s:\n got %v\nwant %v", st, got, want)
			}
		})
	}
}

// testListQuery searches the task text: a substring, ASCII case ignored,
// LIKE's wildcards and its escape taken literally, combined with a status
// and paged.
func testListQuery(t *testing.T, h *harness) {
	s := h.fresh(t)
	tasks := []string{
		"Build a Flask API", "build the docs", "fix 100% of tests", "fix 1000 tests",
		"rename snake_case", "rename snakeXcase", `path C:\dir`, "Ünïcode BUILD",
	}
	b := base()
	for i, task := range tasks {
		j := newJob(jobID(i), b.Add(time.Duration(i)*time.Millisecond))
		j.Task = task
		if i%2 == 1 {
			j.Status = store.StatusComplete
		}
		create(t, s, j)
	}
	for _, c := range []struct {
		q      string
		status store.Status
		want   []int // indexes into tasks, newest first
	}{
		{"build", "", []int{7, 1, 0}},
		{"BUILD", store.StatusComplete, []int{7, 1}},
		{"100%", "", []int{2}},
		{"snake_case", "", []int{4}},
		{`C:\d`, "", []int{6}},
		{"%", "", []int{2}},
		{"nothing like it", "", nil},
	} {
		var want []string
		for _, i := range c.want {
			want = append(want, jobID(i))
		}
		if got := listAll(t, s, store.ListOptions{Query: c.q, Status: c.status, Limit: 1}); !slices.Equal(got, want) {
			t.Errorf("query %q status %q:\n got %v\nwant %v", c.q, c.status, got, want)
		}
	}
}
