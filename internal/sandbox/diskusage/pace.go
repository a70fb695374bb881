package diskusage

import "time"

// Pacer spaces a watchdog's measurements so that they cost at most 5% of
// a CPU however many entries the sandbox made: the next one is due twenty
// times as long after a measurement as it took (MinInterval at least).
// A watchdog ticks more often than that for its cheap checks (the
// free-space floor, one statfs) and measures only when Due. A cap on the
// interval would undo the bound: 163,840 empty files (a 10 GiB quota's
// inodes) take a walk 0.27 s, which every second is 22% of a CPU.
type Pacer struct {
	// MinInterval is the shortest time between two measurements.
	MinInterval time.Duration
	next        time.Time
}

// Due reports whether a measurement is due at now.
func (p *Pacer) Due(now time.Time) bool { return !now.Before(p.next) }

// Measured records that a measurement began at begin and has just ended.
func (p *Pacer) Measured(begin time.Time) {
	took := time.Since(begin)
	p.next = begin.Add(took + max(p.MinInterval, 20*took))
}
