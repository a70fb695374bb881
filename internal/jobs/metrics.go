package jobs

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbox/agentbox/internal/store"
)

// Metrics are the scheduler's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	jobDuration  *prometheus.HistogramVec
	sandboxStart prometheus.Histogram
	claimLatency prometheus.Histogram
	checkpoint   *prometheus.HistogramVec
	uploaded     prometheus.Counter
	// lease is the scheduler's, for whether a registered worker is alive.
	lease atomic.Int64
}

// NewMetrics registers the job metrics on reg, including gauges of jobs by
// state, the queue depth and the workers alive, read from st at scrape
// time.
func NewMetrics(reg prometheus.Registerer, st store.Store) *Metrics {
	m := &Metrics{
		jobDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentbox_job_duration_seconds", Help: "Wall time of job attempts, by final status.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 14),
		}, []string{"status"}),
		sandboxStart: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "agentbox_sandbox_start_seconds", Help: "Time from sandbox create to its guest answering.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 10),
		}),
		claimLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "agentbox_claim_latency_seconds", Help: "Time from a job's creation to its first claim by a worker.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}),
		checkpoint: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "agentbox_checkpoint_seconds", Help: "Time a checkpoint of a job's tree to the blob store took, by result (ok, error).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"result"}),
		uploaded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "agentbox_checkpoint_uploaded_bytes_total", Help: "Bytes of files checkpoints put in the blob store (changed files the store lacked).",
		}),
	}
	m.lease.Store(int64(30 * time.Second))
	reg.MustRegister(m.jobDuration, m.sandboxStart, m.claimLatency, m.checkpoint, m.uploaded, stateCollector{st, m})
	return m
}

// setLease is the lease WorkerAlive judges registered workers by.
func (m *Metrics) setLease(d time.Duration) {
	if m != nil {
		m.lease.Store(int64(d))
	}
}

// claimed observes the claim latency of a job's first attempt; a
// requeued job's wait is not measured (the store keeps no requeue time).
func (m *Metrics) claimed(j store.Job) {
	if m != nil && j.Attempts == 1 {
		m.claimLatency.Observe(time.Since(j.CreatedAt).Seconds())
	}
}

func (m *Metrics) jobEnded(status store.Status, d time.Duration) {
	if m != nil {
		m.jobDuration.WithLabelValues(string(status)).Observe(d.Seconds())
	}
}

// checkpointed observes a checkpoint that took d and uploaded n bytes, or
// failed.
func (m *Metrics) checkpointed(d time.Duration, n int64, err error) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.checkpoint.WithLabelValues(result).Observe(d.Seconds())
	m.uploaded.Add(float64(n))
}

func (m *Metrics) sandboxStarted(d time.Duration) {
	if m != nil {
		m.sandboxStart.Observe(d.Seconds())
	}
}

var (
	jobsDesc  = prometheus.NewDesc("agentbox_jobs", "Jobs by state.", []string{"state"}, nil)
	queueDesc = prometheus.NewDesc("agentbox_queue_depth", "Jobs waiting to be claimed.", nil, nil)
	aliveDesc = prometheus.NewDesc("agentbox_workers_alive", "Registered workers whose heartbeat is recent.", nil, nil)
)

// stateCollector counts jobs by state and the workers alive when scraped.
type stateCollector struct {
	st store.Store
	m  *Metrics
}

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobsDesc
	ch <- queueDesc
	ch <- aliveDesc
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.st.CountByStatus(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(jobsDesc, err)
		return
	}
	for _, s := range []store.Status{store.StatusPending, store.StatusRunning, store.StatusComplete, store.StatusError, store.StatusCanceled} {
		ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(counts[store.StatusPending]))
	ch <- c.workersAlive(ctx)
}

func (c stateCollector) workersAlive(ctx context.Context) prometheus.Metric {
	ws, err := c.st.Workers(ctx)
	if err != nil {
		return prometheus.NewInvalidMetric(aliveDesc, err)
	}
	lease, now, n := time.Duration(c.m.lease.Load()), time.Now(), 0
	for _, w := range ws {
		if WorkerAlive(w, lease, now) {
			n++
		}
	}
	return prometheus.MustNewConstMetric(aliveDesc, prometheus.GaugeValue, float64(n))
}
