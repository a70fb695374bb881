package artifact

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSafeName(t *testing.T) {
	tests := map[string]string{
		"plain.go": "plain.go", ".bashrc": ".bashrc", "ünïcode ☃": "ünïcode ☃", "console.log": "console.log",
		"COM10": "COM10", "CONx": "CONx", "x.CON": "x.CON", // not devices
		`a\b`: "a_b", "tab\tnl\n": "tab_nl_", "nul\x00": "nul_", "del\x7f": "del_", "c1\u009b": "c1_",
		`<>:"|?*`: "_______", "a/b": "a_b",
		"CON": "_CON", "con.tar.gz": "_con.tar.gz", "Prn": "_Prn", "AUX ": "AUX_", "nul .x": "_nul .x",
		"CONIN$": "_CONIN$", "conout$.txt": "_conout$.txt", "COM0": "_COM0", "com9": "_com9", "LPT1.x": "_LPT1.x", "lpt³": "_lpt³",
		"end.": "end_", "end ": "end_", "end. .": "end___", ".": "_", "..": "__", "...": "___",
		"\xff\xfe": "_", "a\xffb\xfe": "a_b_", "ok\xc3": "ok_", "\uFFFD": "\uFFFD",
	}
	for in, want := range tests {
		if got := safeName(in); got != want {
			t.Errorf("safeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRenamedNamesStayShort(t *testing.T) {
	long := strings.Repeat("é", 126) + ".x" // 254 bytes
	n := namer{taken: map[string]bool{foldName(long): true}, next: map[string]int{}}
	got := n.unused(long)
	if len(got) > maxNameBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, "_2.x") {
		t.Errorf("unusedName = %q (%d bytes), want at most %d bytes ending _2.x", got, len(got), maxNameBytes)
	}
	ext := "a." + strings.Repeat("e", 250)
	n.taken[foldName(ext)] = true
	if got := n.unused(ext); len(got) > maxNameBytes || !strings.HasSuffix(got, "_2") {
		t.Errorf("unusedName of a long extension = %q", got)
	}
}

// linear fails the test unless naming n names made the same costs about
// twice as many allocations as n/2 of them, not four times (quadratic).
func linear(t *testing.T, names []string) {
	t.Helper()
	allocs := func(names []string) float64 {
		return testing.AllocsPerRun(1, func() { siblingNames(names, nil) })
	}
	half, all := allocs(names[:len(names)/2]), allocs(names)
	if all > 2.5*half {
		t.Errorf("%d names: %.0f allocations, %d: %.0f: quadratic", len(names)/2, half, len(names), all)
	}
	seen := map[string]bool{}
	for _, o := range siblingNames(names, nil) {
		if seen[foldName(o)] || len(o) > maxNameBytes {
			t.Fatalf("%q (%d bytes) handed out twice or too long", o, len(o))
		}
		seen[foldName(o)] = true
	}
}

func TestManyNamesMadeTheSame(t *testing.T) {
	names := make([]string, 8192)
	for i := range names { // distinct, and all "x___" once made safe
		names[i] = string([]byte{'x', byte(i % 32), byte(i / 32 % 32), byte(i / 1024)})
	}
	linear(t, names)
}

func TestManyLongNamesMadeTheSame(t *testing.T) {
	const chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-+"
	var names []string
	for i := range 2048 { // 255 bytes: a safe name, and an unsafe one made the same; apart only in what a suffix cuts
		k := string([]byte{chars[i%64], chars[i/64]})
		names = append(names, strings.Repeat("y", 252)+"_"+k, strings.Repeat("y", 252)+"\x01"+k)
	}
	linear(t, names)
}
