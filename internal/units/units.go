// Package units reads and writes the quantities agentbox's settings, flags
// and API take: sizes (512m, 2GiB), CPU counts (0.5) and durations (1h30m).
// It is a leaf: it imports no other agentbox package, so that config, wire
// and a public client can all share one spelling of each unit.
package units

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	dockerunits "github.com/docker/go-units"
)

// ParseSize parses a size such as 512m, 2g or 2GiB into bytes.
func ParseSize(s string) (int64, error) {
	n, err := dockerunits.RAMInBytes(s)
	if err != nil {
		return 0, fmt.Errorf("%q: want a size such as 512m or 2g", s)
	}
	return n, nil
}

// ParseCPUs parses a CPU count such as 1, 0.5 or 2.5 into nano-CPUs.
func ParseCPUs(s string) (int64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || f > 1024 {
		return 0, fmt.Errorf("cpus %q: want a positive number such as 1 or 0.5", s)
	}
	return int64(f * 1e9), nil
}

// FormatSize writes a byte count the way people set it: 2GiB, 512MiB,
// 73.8GiB, 1000B.
func FormatSize(n int64) string {
	for _, u := range []struct {
		shift int
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		switch unit := int64(1) << u.shift; {
		case n >= unit && n%unit == 0:
			return strconv.FormatInt(n/unit, 10) + u.name
		case n >= unit:
			return strconv.FormatFloat(float64(n)/float64(unit), 'f', 1, 64) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// FormatCPUs writes nano-CPUs as a CPU count: 1, 0.5, 2.25.
func FormatCPUs(n int64) string { return strconv.FormatFloat(float64(n)/1e9, 'f', -1, 64) }

// FormatDuration writes a duration the way people set it, without zero
// units: 30m, 1h30m, 45s (not 30m0s, 1h30m0s).
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
