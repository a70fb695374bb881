package diskusage

import (
	"testing"
	"time"
)

// TestPacerKeepsWalksUnderFivePercent: however long a measurement takes,
// the next is due twenty times as long after it, never sooner than
// MinInterval; a cap on the interval (there was one, of a second) would
// let a slow walk take a fifth of a CPU and more.
func TestPacerKeepsWalksUnderFivePercent(t *testing.T) {
	for _, took := range []time.Duration{time.Millisecond, 50 * time.Millisecond, 270 * time.Millisecond, 2 * time.Second} {
		p := Pacer{MinInterval: 100 * time.Millisecond}
		begin := time.Now().Add(-took)
		p.Measured(begin)
		end := begin.Add(took)
		gap := max(100*time.Millisecond, 20*took)
		if p.Due(end.Add(gap - 10*time.Millisecond)) {
			t.Errorf("a walk of %v: the next is due before %v", took, gap)
		}
		if !p.Due(end.Add(gap + 10*time.Millisecond)) {
			t.Errorf("a walk of %v: the next is not due %v after", took, gap)
		}
		if share := float64(took) / float64(took+gap); share > 0.05+1e-9 && gap != 100*time.Millisecond {
			t.Errorf("a walk of %v takes %.0f%% of a CPU", took, 100*share)
		}
	}
	var p Pacer
	if !p.Due(time.Now()) {
		t.Error("the first measurement is not due at once")
	}
}
