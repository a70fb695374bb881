package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlite"
)

// benchJob is a job as the API submits it.
func benchJob(id string) store.Job {
	return store.Job{
		ID: id, Task: "Write a Python script that prints the first 100 primes, add pytest tests for it, and run them.",
		Limits:   store.Limits{Timeout: 10 * time.Minute, MaxSteps: 50},
		Metadata: map[string]string{"team": "infra", "source": "bench"},
		Status:   store.StatusPending, MaxAttempts: 3,
		IdempotencyKey: "key-" + id, RequestHash: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		CreatedAt: time.Now(),
	}
}

func benchStore(b *testing.B, opts sqlite.Options) *sqlite.Store {
	return openClosed(b, filepath.Join(b.TempDir(), "bench.db"), opts)
}

func seed(b *testing.B, s *sqlite.Store, n int) {
	for i := range n {
		if _, _, err := s.CreateJob(context.Background(), benchJob(fmt.Sprint("seed-", i))); err != nil {
			b.Fatal(err)
		}
	}
}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkGetJob reads random jobs of 10,000 from all CPUs.
func BenchmarkGetJob(b *testing.B) {
	s := benchStore(b, sqlite.Options{})
	seed(b, s, 10000)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.GetJob(context.Background(), fmt.Sprint("seed-", rand.IntN(10000))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRate(b)
}

// BenchmarkCreateJob creates jobs durably from 1, 8 and 64 goroutines, as
// concurrent API requests would.
func BenchmarkCreateJob(b *testing.B) {
	for _, sync := range []sqlite.Sync{sqlite.SyncFull, sqlite.SyncNormal} {
		for _, clients := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("sync=%s/clients=%d", sync, clients), func(b *testing.B) {
				benchCreate(b, sqlite.Options{Synchronous: sync}, clients)
			})
		}
	}
}

func benchCreate(b *testing.B, opts sqlite.Options, clients int) {
	s := benchStore(b, opts)
	var n atomic.Int64
	b.ResetTimer()
	runClients(b, clients, func() {
		id := fmt.Sprint("job-", n.Add(1))
		if _, _, err := s.CreateJob(context.Background(), benchJob(id)); err != nil {
			b.Error(err)
		}
	})
	reportRate(b)
}

// runClients calls fn b.N times in total from clients goroutines.
func runClients(b *testing.B, clients int, fn func()) {
	var left atomic.Int64
	left.Store(int64(b.N))
	done := make(chan struct{})
	for range clients {
		go func() {
			defer func() { done <- struct{}{} }()
			for left.Add(-1) >= 0 {
				fn()
			}
		}()
	}
	for range clients {
		<-done
	}
}

// BenchmarkAppendEvent appends events to 100 jobs from 8 goroutines.
func BenchmarkAppendEvent(b *testing.B) {
	s := benchStore(b, sqlite.Options{})
	seed(b, s, 100)
	payload := json.RawMessage(`{"stream":"stdout","text":"collected 3 items\n\ntest_primes.py ...  [100%]\n"}`)
	b.ResetTimer()
	runClients(b, 8, func() {
		if _, err := s.AppendEvent(context.Background(), fmt.Sprint("seed-", rand.IntN(100)), "output", payload); err != nil {
			b.Error(err)
		}
	})
	reportRate(b)
}
