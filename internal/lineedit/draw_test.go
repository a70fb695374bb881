package lineedit

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestScreen(t *testing.T) {
	long := strings.Repeat("abcdefghij", 3) // 30 columns
	tests := []struct {
		name   string
		width  int
		input  string
		lines  []string
		row    int
		column int
	}{
		{"prompt", 20, "", []string{"you>"}, 0, 5},
		{"typed", 20, "hello", []string{"you> hello"}, 0, 10},
		{"wraps", 20, long, []string{"you> abcdefghijabcde", "fghijabcdefghij"}, 1, 15},
		{"backspace across the wrap", 20, long + strings.Repeat("\x7f", 16), []string{"you> abcdefghijabcd"}, 0, 19},
		{"exact width", 20, long[:15], []string{"you> abcdefghijabcde"}, 1, 0},
		{"exact width then more", 20, long[:15] + "X" + "\x7f", []string{"you> abcdefghijabcde"}, 1, 0},
		{"cursor moved back over the wrap", 20, long[:17] + left + left + left, []string{"you> abcdefghijabcde", "fg"}, 0, 19},
		{"multi-line", 20, "ab\x1b\rcd\x1b\ref" + up, []string{"you> ab", "   … cd", "   … ef"}, 1, 7},
		{"multi-line wrapped", 10, "abcdefgh\x1b\rxy" + up, []string{"you> abcde", "fgh", "   … xy"}, 0, 7},
		{"wide runes", 10, "漢字漢字", []string{"you> 漢字", "漢字"}, 1, 4},
		{"wide rune at the edge", 10, "abcd漢", []string{"you> abcd", "漢"}, 1, 2},
		{"tab", 20, "a\tb", []string{"you> a  b"}, 0, 9},
		{"deleted lines erased", 20, "ab\x1b\rcd\x1b\ref\x7f\x7f\x7f\x7f\x7f\x7f", []string{"you> ab"}, 0, 7},
		{"ctrl-l", 20, "ab\x0c", []string{"you> ab"}, 0, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Config{Width: func() int { return tt.width }})
			ch := h.start(context.Background())
			h.write(tt.input)
			m := h.awaitScreen(tt.width, tt.lines)
			if m.row != tt.row || m.col != tt.column {
				t.Errorf("cursor at %d,%d, want %d,%d", m.row, m.col, tt.row, tt.column)
			}
			h.write("\r")
			h.wait(ch)
		})
	}
}

// awaitScreen waits until the screen shows lines and returns it.
func (h *harness) awaitScreen(width int, lines []string) *vt {
	h.t.Helper()
	want := strings.Join(lines, "\n")
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := h.screen(width)
		if m.screen() == want {
			return m
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("screen\n%s\nwant\n%s", m.screen(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSubmitLeavesMessageAbove(t *testing.T) {
	for _, text := range []string{"hi", strings.Repeat("x", 15), strings.Repeat("y", 30)} {
		h := newHarness(t, Config{Width: func() int { return 20 }})
		h.readLine(text + "\r")
		h.readLine("\x1b[200~a\nb\x1b[201~" + left + "\r")
		ch := h.start(context.Background())
		h.awaitOutput("\x1b[J")
		var want []string
		for s := "you> " + text; s != ""; s = s[min(20, len(s)):] {
			want = append(want, s[:min(20, len(s))])
		}
		want = append(want, "you> a", "   … b", "you>")
		m := h.awaitScreen(20, want)
		if m.row != len(want)-1 || m.col != 5 {
			t.Errorf("cursor at %d,%d", m.row, m.col)
		}
		h.write("\r")
		h.wait(ch)
	}
}
