package units

import "testing"

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{2 << 30: "2GiB", 512 << 20: "512MiB", 1000: "1000B", 3<<30 + 1<<29: "3.5GiB", 1 << 40: "1TiB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
