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

func TestGUIMarkdown(t *testing.T) {
	var b bytes.Buffer
	GUIMarkdown(&b, GUIResult{GuestRSS: 26 << 20, Idle: Memory{Usage: 6 << 20, Anon: 4 << 20},
		Desktop: Memory{Usage: 64 << 20, Anon: 54 << 20}, Jupyter: Memory{Usage: 204 << 20, Anon: 192 << 20},
		DesktopStart: 600 * time.Millisecond, KernelStart: 1300 * time.Millisecond,
		Rows: []Row{{Name: "shot", Baseline: "import", Ours: Stats{P50: 10 * time.Millisecond}, Base: Stats{P50: 100 * time.Millisecond}}}})
	for _, want := range []string{"its RSS 26.0 MiB", "| 6.0 MiB | 4.0 MiB |", "| 64.0 MiB | 54.0 MiB |", "| 204.0 MiB | 192.0 MiB |",
		"desktop 600.00 ms", "first execution 1300.00 ms", "| 10.0× |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in:\n%s", want, b.String())
		}
	}
}

func TestUIMarkdown(t *testing.T) {
	var b bytes.Buffer
	UIMarkdown(&b, UIOptions{Jobs: 10, Steps: 4, Requests: 2}, []UIRow{{Name: "GET /", Stats: Stats{P50: 3 * time.Millisecond, P95: 5 * time.Millisecond}, Max: 9 * time.Millisecond, Bytes: 100}})
	for _, want := range []string{"10 jobs in SQLite, the newest with 4 steps (12 events); 2 requests each", "| GET / | 3.00 ms | 5.00 ms | 9.00 ms | 100 |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in:\n%s", want, b.String())
		}
	}
}
