package imagename

import (
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"img":                                   "img:latest",
		"img:latest":                            "img:latest",
		"docker.io/library/img":                 "img:latest",
		"team/img:v2":                           "team/img:v2",
		"localhost:5000/img":                    "localhost:5000/img:latest",
		"img@sha256:" + strings.Repeat("a", 64): "img@sha256:" + strings.Repeat("a", 64),
	} {
		if got, err := Normalize(in); err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "UPPER", "a b", "img:", "-x"} {
		if got, err := Normalize(bad); err == nil {
			t.Errorf("Normalize(%q) = %q, want an error", bad, got)
		}
	}
}
