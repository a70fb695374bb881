package microvm

import "testing"

// TestFSNoFile: virtiofsd's open-files limit follows the sandbox's, within
// its bounds and what this process can give, whatever the caller's soft
// limit is.
func TestFSNoFile(t *testing.T) {
	for _, tc := range []struct{ noFile, nrOpen, want int64 }{
		{0, 1 << 20, 1 << 16},
		{1024, 1 << 20, 1 << 16},
		{4096, 1 << 20, 4096 * 64},
		{1 << 14, 1 << 20, 1 << 20},
		{1 << 40, 1 << 20, 1 << 20},
		{4096, 100_000, 100_000},
		{4096, 20_000, 20_000}, // a hard limit without CAP_SYS_RESOURCE
		{4096, 0, 4096 * 64},   // no ceiling read
	} {
		if got := fsNoFile(tc.noFile, tc.nrOpen); got != tc.want {
			t.Errorf("fsNoFile(%d, %d) = %d, want %d", tc.noFile, tc.nrOpen, got, tc.want)
		}
	}
}
