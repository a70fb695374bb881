package workspace

import "time"

// SetRatioFloor sets how many bytes are unpacked before Limits.MaxRatio
// applies, for a test, and returns a func restoring it.
func SetRatioFloor(n int64) (restore func()) {
	old := ratioFloor
	ratioFloor = n
	return func() { ratioFloor = old }
}

// SweepNow sweeps s's cache of idle materializations now, as if the last
// sweep were long ago.
func (s *Shared) SweepNow() {
	s.mu.Lock()
	s.swept = time.Time{}
	s.mu.Unlock()
	s.sweep()
}

// Idle is how long a job's materializations stay unread in the cache.
const Idle = idle
