package ui

import (
	"reflect"
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
