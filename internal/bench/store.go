package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

// StoreOptions size the store benchmark.
type StoreOptions struct {
	Creates     int // durable job creates, over all goroutines
	Reads       int // status reads (GetJob)
	Claims      int // submit → claim round trips, one at a time
	Concurrency int // goroutines for creates and reads
	// Poll is the idle worker's poll interval: the claim latency a store
	// without wake-ups would show.
	Poll time.Duration
}

func (o StoreOptions) withDefaults() StoreOptions {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Creates, 5000)
	def(&o.Reads, 50000)
	def(&o.Claims, 200)
	def(&o.Concurrency, 8)
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	return o
}

// StoreResult is one store's numbers.
type StoreResult struct {
	Name          string
	CreatesPerSec float64
	ReadsPerSec   float64
	// Claim is submit → claimed by an idle worker: CreateJob on the
	// submitter's store, then the worker's wake-up (a store.Notifier note
	// on a store of its own, as another replica has, or the submitter's
	// in-process signal for a store without one) and its ClaimJob.
	Claim Stats
	// Woken says how the worker learned of the job.
	Woken string
}

// Stores are the two ends of a store benchmark: the submitter's store and
// the worker's (another connection pool to the same database for a shared
// store; the same store otherwise).
type Stores struct {
	Name           string
	Submit, Worker store.Store
}

// StoreEach measures each of stores in turn, naming each on progress as
// it starts.
func StoreEach(ctx context.Context, stores []Stores, o StoreOptions, progress io.Writer) ([]StoreResult, error) {
	var rs []StoreResult
	for _, s := range stores {
		fmt.Fprintf(progress, "measuring %s...\n", s.Name)
		r, err := Store(ctx, s, o)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// Store measures a store: durable creates/s and status reads/s with
// o.Concurrency goroutines, and the claim latency of an idle worker.
func Store(ctx context.Context, s Stores, o StoreOptions) (StoreResult, error) {
	o = o.withDefaults()
	r := StoreResult{Name: s.Name}
	ids := make([]string, o.Creates)
	for i := range ids {
		ids[i] = fmt.Sprintf("job_bench%08d", i)
	}
	el, err := parallel(o.Concurrency, len(ids), func(i int) error {
		_, _, err := s.Submit.CreateJob(ctx, store.Job{ID: ids[i], Task: "bench", MaxAttempts: 3})
		return err
	})
	if err != nil {
		return r, fmt.Errorf("create: %w", err)
	}
	r.CreatesPerSec = float64(len(ids)) / el.Seconds()
	el, err = parallel(o.Concurrency, o.Reads, func(int) error {
		_, err := s.Submit.GetJob(ctx, ids[rand.IntN(len(ids))])
		return err
	})
	if err != nil {
		return r, fmt.Errorf("read: %w", err)
	}
	r.ReadsPerSec = float64(o.Reads) / el.Seconds()
	// Drain what the creates queued, so each claim below takes its own job.
	for {
		if _, err := s.Submit.ClaimJob(ctx, "drain", time.Hour); errors.Is(err, store.ErrNoJob) {
			break
		} else if err != nil {
			return r, fmt.Errorf("drain: %w", err)
		}
	}
	r.Claim, r.Woken, err = claimLatency(ctx, s, o)
	return r, err
}

// parallel runs f(0..n-1) on c goroutines and returns the elapsed time.
func parallel(c, n int, f func(i int) error) (time.Duration, error) {
	var next int
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), first
}

// claimLatency submits o.Claims jobs one at a time to an idle worker and
// times each from the submit to its claim.
func claimLatency(ctx context.Context, s Stores, o StoreOptions) (Stats, string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wake := make(chan struct{}, 1)
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	woken, direct := "in-process signal", true
	if n, ok := s.Worker.(store.Notifier); ok {
		notes, err := n.Subscribe(ctx)
		if err != nil {
			return Stats{}, "", fmt.Errorf("subscribe: %w", err)
		}
		woken, direct = "LISTEN/NOTIFY on the worker's own connection", false
		go func() {
			for n := range notes {
				if n.Kind == store.NotePending {
					signal()
				}
			}
		}()
	}
	claimed := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		for {
			select {
			case <-wake:
			case <-time.After(o.Poll):
			case <-ctx.Done():
				return
			}
			for {
				j, err := s.Worker.ClaimJob(ctx, "bench-worker", time.Hour)
				if errors.Is(err, store.ErrNoJob) {
					break
				}
				if err != nil {
					errc <- err
					return
				}
				claimed <- j.ID
			}
		}
	}()
	ds := make([]time.Duration, 0, o.Claims)
	for i := range o.Claims {
		id := fmt.Sprintf("job_claim%06d", i)
		start := time.Now()
		if _, _, err := s.Submit.CreateJob(ctx, store.Job{ID: id, Task: "bench", MaxAttempts: 3}); err != nil {
			return Stats{}, "", err
		}
		if direct {
			signal()
		}
		select {
		case got := <-claimed:
			if got != id {
				return Stats{}, "", fmt.Errorf("the worker claimed %s, want %s", got, id)
			}
		case err := <-errc:
			return Stats{}, "", err
		case <-time.After(10 * o.Poll):
			return Stats{}, "", fmt.Errorf("job %s was not claimed in %v", id, 10*o.Poll)
		}
		ds = append(ds, time.Since(start))
	}
	return summarize(ds), woken, nil
}

// StoreMarkdown writes the results as a table.
func StoreMarkdown(w io.Writer, o StoreOptions, rs []StoreResult) {
	o = o.withDefaults()
	fmt.Fprintf(w, "%d durable creates and %d status reads on %d goroutines; %d submit → claim round trips, one at a time, an idle worker polling every %v.\n\n",
		o.Creates, o.Reads, o.Concurrency, o.Claims, o.Poll)
	fmt.Fprintln(w, "| store | creates/s | status reads/s | claim p50 | claim p95 | the worker is woken by |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %s | %s | %s |\n", r.Name, r.CreatesPerSec, r.ReadsPerSec, ms(r.Claim.P50), ms(r.Claim.P95), r.Woken)
	}
}
