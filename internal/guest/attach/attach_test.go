package attach

import (
	"bytes"
	"errors"
	"testing"
)

func TestMaxOutputFlag(t *testing.T) {
	for _, tt := range []struct {
		flag       string
		onTerminal bool
		want       int64
		bad        bool
	}{
		{"", false, 0, false},
		{"", true, 10 << 20, false},
		{"0", true, 0, false},
		{"100k", false, 100 << 10, false},
		{"1g", true, 1 << 30, false},
		{"lots", false, 0, true},
		{"-1", false, 0, true},
	} {
		got, err := ParseMaxOutput(tt.flag, tt.onTerminal)
		if got != tt.want || (err != nil) != tt.bad {
			t.Errorf("ParseMaxOutput(%q, %v) = %d, %v", tt.flag, tt.onTerminal, got, err)
		}
	}
}

// TestCapWriterKeepsTheFirstBytes: the bytes within the cap pass whole,
// across writes; the write that passes it fails with the reason.
func TestCapWriterKeepsTheFirstBytes(t *testing.T) {
	var out bytes.Buffer
	w := &capWriter{w: &out, max: 10}
	if n, err := w.Write([]byte("12345678")); n != 8 || err != nil {
		t.Fatalf("within the cap: %d, %v", n, err)
	}
	n, err := w.Write([]byte("abcd"))
	var cut *OutputCutError
	if n != 2 || !errors.As(err, &cut) || out.String() != "12345678ab" {
		t.Fatalf("past the cap: %d, %v, %q", n, err, out.String())
	}
	if got := (&OutputCutError{Max: 10 << 20}).Error(); got != "output cut at 10 MiB (--max-output); rerun with --max-output 0 for all of it" {
		t.Errorf("reason %q", got)
	}
	if sizeName(1500) != "1500 bytes" || sizeName(3<<10) != "3 KiB" {
		t.Errorf("sizeName: %q, %q", sizeName(1500), sizeName(3<<10))
	}
}
