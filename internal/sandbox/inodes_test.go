package sandbox_test

import (
	"testing"

	"github.com/agentbox/agentbox/internal/sandbox"
)

// TestInodeLimit: one entry per 64 KiB of quota, within its floor and
// cap; the default 10 GiB quota leaves room for an npm install of a React
// app (~40,000 files) several times over.
func TestInodeLimit(t *testing.T) {
	for _, tt := range []struct {
		disk, want int64
	}{
		{64 << 20, sandbox.MinInodes},
		{1 << 30, 16_384},
		{10 << 30, 163_840},
		{64 << 30, sandbox.MaxInodes},
		{100 << 30, sandbox.MaxInodes},
	} {
		if got := sandbox.InodeLimit(tt.disk); got != tt.want {
			t.Errorf("InodeLimit(%d MiB) = %d, want %d", tt.disk>>20, got, tt.want)
		}
	}
}
