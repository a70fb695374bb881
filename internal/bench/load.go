package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// LoadOptions drive an HTTP load test against a running agentbox API.
type LoadOptions struct {
	URL, Token string
	Clients    int           // concurrent connections (default 32)
	Duration   time.Duration // per phase (default 10s)
}

// LoadResult is one phase of a load test.
type LoadResult struct {
	Name      string
	Requests  int
	Errors    int
	PerSecond float64
	P50, P99  time.Duration
}

// Load measures durable job creates, then status reads of one job.
func Load(ctx context.Context, o LoadOptions) ([]LoadResult, error) {
	if o.Clients <= 0 {
		o.Clients = 32
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.Clients, MaxConnsPerHost: o.Clients}}
	body := []byte(`{"task":"echo benchmark"}`)
	create := func() (*http.Request, error) {
		return http.NewRequest(http.MethodPost, o.URL+"/v1/jobs", bytes.NewReader(body))
	}
	creates := phase(ctx, hc, o, "POST /v1/jobs (durable create)", http.StatusCreated, create)
	var made struct {
		JobID string `json:"job_id"`
	}
	if err := once(hc, o, create, &made); err != nil {
		return nil, err
	}
	reads := phase(ctx, hc, o, "GET /v1/jobs/{id}", http.StatusOK, func() (*http.Request, error) {
		return http.NewRequest(http.MethodGet, o.URL+"/v1/jobs/"+made.JobID, nil)
	})
	return []LoadResult{creates, reads}, nil
}

func once(hc *http.Client, o LoadOptions, mk func() (*http.Request, error), out any) error {
	req, err := mk()
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+o.Token)
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("load: %s %s: status %d", req.Method, req.URL.Path, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// phase runs o.Clients loops of mk for o.Duration; a request counts as an
// error unless it answers want.
func phase(ctx context.Context, hc *http.Client, o LoadOptions, name string, want int, mk func() (*http.Request, error)) LoadResult {
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	var wg sync.WaitGroup
	begin := time.Now()
	for range o.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			bad := 0
			for ctx.Err() == nil {
				d, ok := hit(hc, o.Token, mk, want)
				if ok {
					mine = append(mine, d)
				} else if ctx.Err() == nil {
					bad++
				}
			}
			mu.Lock()
			lat, errs = append(lat, mine...), errs+bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	took := time.Since(begin)
	slices.Sort(lat)
	r := LoadResult{Name: name, Requests: len(lat), Errors: errs, PerSecond: float64(len(lat)) / took.Seconds()}
	if len(lat) > 0 {
		r.P50, r.P99 = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return r
}

func hit(hc *http.Client, token string, mk func() (*http.Request, error), want int) (time.Duration, bool) {
	req, err := mk()
	if err != nil {
		return 0, false
	}
	req.Header.Set("Authorization", "Bearer "+token)
	begin := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return time.Since(begin), resp.StatusCode == want
}

// LoadMarkdown renders load results as a table.
func LoadMarkdown(w io.Writer, rs []LoadResult) {
	fmt.Fprintln(w, "| route | requests | errors | req/s | p50 | p99 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %d | %d | %.0f | %s | %s |\n", r.Name, r.Requests, r.Errors, r.PerSecond, ms(r.P50), ms(r.P99))
	}
}
