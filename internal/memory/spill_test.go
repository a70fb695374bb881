package memory

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSpill(t *testing.T) {
	lines := filler(1, 100_000)
	tests := []struct {
		name    string
		text    string
		limit   int
		spilled bool
	}{
		{"short", "hello", 100, false},
		{"exact", strings.Repeat("a", 100), 100, false},
		{"lines", lines, 4000, true},
		{"one long line", strings.Repeat("abcdefghij", 10_000), 1000, true},
		{"multibyte", strings.Repeat("日本語のテキスト", 5000), 1000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shown, spilled := Spill(tt.text, tt.limit, "/workspace/.agentbox/out/step-7.txt")
			if spilled != tt.spilled {
				t.Fatalf("spilled = %v", spilled)
			}
			if !spilled {
				if shown != tt.text {
					t.Fatal("text changed")
				}
				return
			}
			if len(shown) > tt.limit || !utf8.ValidString(shown) {
				t.Fatalf("%d bytes (limit %d), valid UTF-8 %v", len(shown), tt.limit, utf8.ValidString(shown))
			}
			if !strings.Contains(shown, "saved at /workspace/.agentbox/out/step-7.txt") {
				t.Fatalf("no path in %q", shown)
			}
			head, tail := tt.text[:50], tt.text[len(tt.text)-50:]
			if !strings.HasPrefix(shown, head) || !strings.HasSuffix(shown, tail) {
				t.Fatal("head or tail lost")
			}
		})
	}
}
