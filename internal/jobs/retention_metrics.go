package jobs

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"
)

// RegisterDiskMetrics registers two gauges on reg:
// agentbox_disk_free_bytes, the free space of the filesystem holding
// dataDir, read by free at scrape time (NaN when it fails), and
// agentbox_disk_min_free_bytes, the floor below which no sandbox starts.
func RegisterDiskMetrics(reg prometheus.Registerer, dataDir string, floor int64, free func(dir string) (int64, error)) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agentbox_disk_free_bytes",
			Help: "Free space on the filesystem of the data dir (workspaces), for unprivileged users.",
		}, func() float64 {
			n, err := free(dataDir)
			if err != nil {
				return math.NaN()
			}
			return float64(n)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agentbox_disk_min_free_bytes",
			Help: "Free space below which no new sandbox starts (AGENTBOX_MIN_FREE_DISK).",
		}, func() float64 { return float64(floor) }),
	)
}
