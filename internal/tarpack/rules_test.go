package tarpack

import "testing"

// TestLinkLeadsOut: a link leads out of its tree when its target is
// absolute or climbs above the root from the link's own directory.
func TestLinkLeadsOut(t *testing.T) {
	for _, tc := range []struct {
		path, target string
		out          bool
	}{
		{"a", "b", false},
		{"d/a", "../b", false},
		{"d/a", "../../b", true},
		{"a", "..", true},
		{"a", "/etc/passwd", true},
		{"d/e/a", "../../x/../y", false},
	} {
		if got := LinkLeadsOut(tc.path, tc.target); got != tc.out {
			t.Errorf("LinkLeadsOut(%q, %q) = %v, want %v", tc.path, tc.target, got, tc.out)
		}
	}
	if Join(".", "a") != "a" || Join("d", "a") != "d/a" {
		t.Error("Join")
	}
}
