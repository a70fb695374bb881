package egress

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the egress proxies' Prometheus metrics, shared by every
// job's proxy. A nil *Metrics records nothing.
type Metrics struct {
	conns  *prometheus.CounterVec
	byDir  *prometheus.CounterVec
	in     prometheus.Counter
	out    prometheus.Counter
	active prometheus.Gauge
	allow  prometheus.Counter
	deny   prometheus.Counter
}

// NewMetrics registers the egress metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		conns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentbox_egress_connections_total", Help: "Connection attempts through the egress proxies (plain HTTP: requests), by decision (allow, deny).",
		}, []string{"decision"}),
		byDir: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentbox_egress_bytes_total", Help: "Bytes the egress proxies moved to and from the outside, by direction (in, out).",
		}, []string{"direction"}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentbox_egress_active_connections", Help: "Sandbox connections the egress proxies are serving.",
		}),
	}
	m.in, m.out = m.byDir.WithLabelValues("in"), m.byDir.WithLabelValues("out")
	m.allow, m.deny = m.conns.WithLabelValues("allow"), m.conns.WithLabelValues("deny")
	reg.MustRegister(m.conns, m.byDir, m.active)
	return m
}

func (m *Metrics) attempt(decision string) {
	if m == nil {
		return
	}
	if decision == "allow" {
		m.allow.Inc()
	} else {
		m.deny.Inc()
	}
}

func (m *Metrics) bytes(in, out int64) {
	if m == nil {
		return
	}
	if in > 0 {
		m.in.Add(float64(in))
	}
	if out > 0 {
		m.out.Add(float64(out))
	}
}

// addActive moves the gauge by d (one proxy's count is not the total).
func (m *Metrics) addActive(d int) {
	if m != nil {
		m.active.Add(float64(d))
	}
}
