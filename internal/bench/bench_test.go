package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	s := summarize(ds)
	if s.N != 100 || s.Min != time.Millisecond || s.P50 != 51*time.Millisecond || s.P95 != 96*time.Millisecond {
		t.Errorf("stats %+v", s)
	}
}

func TestMarkdownRatio(t *testing.T) {
	var b bytes.Buffer
	Markdown(&b, []Row{{Name: "exec", Baseline: "docker exec", Ours: Stats{P50: 2 * time.Millisecond}, Base: Stats{P50: 60 * time.Millisecond}}})
	if !strings.Contains(b.String(), "| 30.0× |") {
		t.Errorf("table:\n%s", b.String())
	}
}
