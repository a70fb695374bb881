package ui

import (
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestANSI(t *testing.T) {
	for _, tt := range []struct {
		name, in string
		want     []Span
	}{
		{"plain", "hello\n", []Span{{"", "hello\n"}}},
		{"colours", "a\x1b[31mred\x1b[0m b", []Span{{"", "a"}, {"ansi-fg-1", "red"}, {"", " b"}}},
		{"bold bright bg", "\x1b[1;92;44mX\x1b[22mY\x1b[39;49mZ", []Span{{"ansi-bold ansi-fg-10 ansi-bg-4", "X"}, {"ansi-fg-10 ansi-bg-4", "Y"}, {"", "Z"}}},
		{"reset by empty SGR", "\x1b[33mw\x1b[mn", []Span{{"ansi-fg-3", "w"}, {"", "n"}}},
		{"256 and rgb skipped", "\x1b[38;5;196mA\x1b[48;2;1;2;3;1mB", []Span{{"", "A"}, {"ansi-bold", "B"}}},
		{"other CSI dropped", "\x1b[2J\x1b[1;1Hclear\x1b[K", []Span{{"", "clear"}}},
		{"OSC title and link dropped", "\x1b]0;title\x07\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", []Span{{"", "link"}}},
		{"cut-off CSI", "ok\x1b[31", []Span{{"", "ok"}}},
		{"lone ESC", "a\x1b", []Span{{"", "a"}}},
		{"broken CSI keeps the rest", "a\x1b[3\nb", []Span{{"", "a\nb"}}},
		{"two-byte escapes", "\x1b(Ba\x1bcb", []Span{{"", "ab"}}},
		{"controls dropped, CR", "a\x00\x08b\rc\r\nd\x7f", []Span{{"", "ab\nc\nd"}}},
		{"html is text", "<script>alert(1)</script>\x1b[31m<b>&</b>", []Span{{"", "<script>alert(1)</script>"}, {"ansi-fg-1", "<b>&</b>"}}},
		{"garbage params", "\x1b[31;=;99;;1mq", []Span{{"ansi-bold ansi-fg-1", "q"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ANSI(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ANSI(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestANSIStyleSwitchesCostNoCopies: a sandbox printing 1 MiB of style
// switches with a letter between (the attack pass's "\x1b[mA", and a
// colour switched on and off with nothing between) gets one span, built
// once: the spans were copied whole at each switch, 0.8 s of the
// server's CPU for one timeline.
func TestANSIStyleSwitchesCostNoCopies(t *testing.T) {
	for _, unit := range []string{"\x1b[mA", "\x1b[31m\x1b[0mA"} {
		in := strings.Repeat(unit, (1<<20)/len(unit))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		spans := ANSI(in)
		runtime.ReadMemStats(&after)
		if len(spans) != 1 || len(spans[0].Text) != strings.Count(in, "A") {
			t.Fatalf("%q: %d spans", unit, len(spans))
		}
		if b := after.TotalAlloc - before.TotalAlloc; b > 64<<20 {
			t.Errorf("%q: %d MiB allocated for a span of %d bytes: a copy per switch", unit, b>>20, len(spans[0].Text))
		}
	}
}
