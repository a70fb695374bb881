package ignore

import "time"

// SetMatchBudget gives m another time budget than maxMatching: a test of
// what the work bound leaves alone must not depend on how fast a loaded
// machine (or the race detector) matches.
func SetMatchBudget(m *Matcher, d time.Duration) { m.budget = d }
