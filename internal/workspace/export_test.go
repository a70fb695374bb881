package workspace

// SetRatioFloor sets how many bytes are unpacked before Limits.MaxRatio
// applies, for a test, and returns a func restoring it.
func SetRatioFloor(n int64) (restore func()) {
	old := ratioFloor
	ratioFloor = n
	return func() { ratioFloor = old }
}
