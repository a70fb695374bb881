package capped

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestKeepsTheFirstBytes: past Max nothing more is kept, whether written
// directly or copied in by io.Copy (which would use a ReadFrom if the
// buffer had one), and no write fails.
func TestKeepsTheFirstBytes(t *testing.T) {
	for _, tt := range []struct {
		max, want int
	}{{0, DefaultMax}, {10, 10}} {
		b := &Buffer{Max: tt.max}
		if n, err := b.Write([]byte("abc")); n != 3 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
		if _, err := io.Copy(b, strings.NewReader(strings.Repeat("x", 1<<20))); err != nil {
			t.Fatal(err)
		}
		if b.Len() != tt.want || !strings.HasPrefix(b.String(), "abcxx") {
			t.Errorf("Max %d: kept %d bytes (%q…), want %d", tt.max, b.Len(), b.String()[:5], tt.want)
		}
	}
	var _ io.Writer = (*Buffer)(nil)
	if _, ok := any(&Buffer{}).(io.ReaderFrom); ok {
		t.Error("Buffer has a ReadFrom, which io.Copy would use past Write's cap")
	}
	_ = bytes.MinRead
}
