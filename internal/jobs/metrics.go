package jobs

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentbox/agentbox/internal/store"
)

// Metrics are the scheduler's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	jobDuration  *prometheus.HistogramVec
	sandboxStart prometheus.Histogram
}

// NewMetrics registers the job metrics on reg, including gauges of jobs by
// state and the queue depth read from st at scrape time.
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
	}
	reg.MustRegister(m.jobDuration, m.sandboxStart, stateCollector{st})
	return m
}

func (m *Metrics) jobEnded(status store.Status, d time.Duration) {
	if m != nil {
		m.jobDuration.WithLabelValues(string(status)).Observe(d.Seconds())
	}
}

func (m *Metrics) sandboxStarted(d time.Duration) {
	if m != nil {
		m.sandboxStart.Observe(d.Seconds())
	}
}

var (
	jobsDesc  = prometheus.NewDesc("agentbox_jobs", "Jobs by state.", []string{"state"}, nil)
	queueDesc = prometheus.NewDesc("agentbox_queue_depth", "Jobs waiting to be claimed.", nil, nil)
)

// stateCollector counts jobs by state when scraped.
type stateCollector struct{ st store.Store }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobsDesc
	ch <- queueDesc
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
}
