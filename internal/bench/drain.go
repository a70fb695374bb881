package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// DrainOptions size the drain benchmark.
type DrainOptions struct {
	Jobs, Workers, Concurrency int
}

// DrainResult is how long a cluster took to run a queue of jobs.
type DrainResult struct {
	Jobs      int
	Submitted time.Duration // all jobs queued
	Drained   time.Duration // from the first submit to the last job's end
	Complete  int           // jobs that ended complete
}

// Drain queues o.Jobs jobs of the shell agent's `true` through the API at
// url (8 clients), then waits until none is pending or running.
func Drain(ctx context.Context, url, token string, o DrainOptions) (DrainResult, error) {
	lo := LoadOptions{URL: url, Token: token, Clients: 8}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: lo.Clients}}
	body := []byte(`{"task":"true"}`)
	start := time.Now()
	if _, err := parallel(lo.Clients, o.Jobs, func(int) error {
		var made struct {
			JobID string `json:"job_id"`
		}
		return once(hc, lo, func() (*http.Request, error) {
			return http.NewRequest(http.MethodPost, url+"/v1/jobs", bytes.NewReader(body))
		}, &made)
	}); err != nil {
		return DrainResult{}, err
	}
	r := DrainResult{Jobs: o.Jobs, Submitted: time.Since(start)}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		busy := 0
		for _, st := range []string{"pending", "running"} {
			n, err := countJobs(ctx, hc, lo, st)
			if err != nil {
				return r, err
			}
			busy += n
		}
		if busy == 0 {
			r.Drained = time.Since(start)
			break
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}
	n, err := countJobs(ctx, hc, lo, "complete")
	r.Complete = n
	return r, err
}

// countJobs counts the jobs in a status, through the API's pages.
func countJobs(ctx context.Context, hc *http.Client, lo LoadOptions, status string) (int, error) {
	n, cursor := 0, ""
	for {
		var page struct {
			Jobs       []struct{} `json:"jobs"`
			NextCursor string     `json:"next_cursor"`
		}
		u := fmt.Sprintf("%s/v1/jobs?status=%s&limit=1000&cursor=%s", lo.URL, status, cursor)
		if err := once(hc, lo, func() (*http.Request, error) { return http.NewRequestWithContext(ctx, http.MethodGet, u, nil) }, &page); err != nil {
			return n, err
		}
		n += len(page.Jobs)
		if cursor = page.NextCursor; cursor == "" {
			return n, nil
		}
	}
}

// DrainMarkdown writes the result as a table.
func DrainMarkdown(w io.Writer, o DrainOptions, r DrainResult) {
	fmt.Fprintf(w, "%d jobs (the shell agent's `true`, a sandbox each) queued through one API replica, drained by %d workers of %d slots each, on one PostgreSQL.\n\n",
		o.Jobs, o.Workers, o.Concurrency)
	fmt.Fprintln(w, "| jobs | queued in | drained in | jobs/s | complete |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	fmt.Fprintf(w, "| %d | %.1f s | %.1f s | %.1f | %d |\n", r.Jobs, r.Submitted.Seconds(), r.Drained.Seconds(), float64(r.Jobs)/r.Drained.Seconds(), r.Complete)
}
