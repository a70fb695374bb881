package main

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// TestBenchStore runs `agentbox bench store` small against the tests'
// PostgreSQL: both stores are measured, and the PostgreSQL worker is woken
// by its notes (a worker left to its poll would take a second a claim, and
// the run would show it).
func TestBenchStore(t *testing.T) {
	url := testenv.Postgres(t)
	out, errOut, err := run(t.Context(), "bench", "store", "--postgres", url, "--creates", "100", "--reads", "500", "--claims", "10")
	if err != nil {
		t.Fatalf("bench store: %v\n%s%s", err, out, errOut)
	}
	for _, want := range []string{"100 durable creates and 500 status reads", "| SQLite |", "| PostgreSQL at postgres://", "LISTEN/NOTIFY"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Split(line, "|"); len(f) > 5 && strings.Contains(f[1], "PostgreSQL") {
			if p50 := strings.TrimSpace(f[4]); !strings.HasSuffix(p50, " ms") || len(p50) > len("99.99 ms") {
				t.Errorf("PostgreSQL claim p50 %q: not woken by its notes", p50)
			}
		}
	}
}

// TestBenchDrain runs `agentbox bench drain` small: a cluster of an API
// replica and two workers in one process drains six jobs, all complete.
func TestBenchDrain(t *testing.T) {
	testenv.DockerWithImage(t)
	testenv.Postgres(t) // skips or fails as the PostgreSQL tests do; the bench starts its own server
	t.Setenv("AGENTBOX_GUEST_BINARY", guestBinary)
	out, errOut, err := run(t.Context(), "bench", "drain", "--jobs", "6", "--workers", "2", "--concurrency", "2")
	if err != nil {
		t.Fatalf("bench drain: %v\n%s%s", err, out, errOut)
	}
	if !strings.Contains(out, "drained by 2 workers of 2 slots each") || !strings.Contains(out, "| 6 |") {
		t.Errorf("output:\n%s", out)
	}
}
