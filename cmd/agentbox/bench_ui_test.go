package main

import (
	"strings"
	"testing"
)

// TestBenchUI runs `agentbox bench ui` small: it fills a store, signs in
// and times the pages, which must all answer (a sign-in page or an error
// fails it).
func TestBenchUI(t *testing.T) {
	out, errOut, err := run(t.Context(), "bench", "ui", "--jobs", "200", "--steps", "30", "--requests", "3")
	if err != nil {
		t.Fatalf("bench ui: %v\n%s%s", err, out, errOut)
	}
	for _, want := range []string{"200 jobs in SQLite, the newest with 30 steps (90 events)",
		"| GET / (job list, first page) |", "| GET /jobs/{id} (30 steps) |", "| GET /v1/jobs?limit=50 (API) |"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
