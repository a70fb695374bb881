package main

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// TestBenchCheckpoint runs `agentbox bench checkpoint` small: each
// 1-file change uploads one blob, and the docker exec tar baseline runs.
func TestBenchCheckpoint(t *testing.T) {
	testenv.DockerWithImage(t)
	out, errOut, err := run(t.Context(), "bench", "checkpoint", "--files", "300", "--rounds", "4")
	if err != nil {
		t.Fatalf("bench checkpoint: %v\n%s%s", err, out, errOut)
	}
	for _, want := range []string{"A workspace of 300 files (320 entries), 4 rounds", "| checkpoint after a 1-file change |", "(4 blobs in 4 rounds)", "`docker exec C tar", "faster."} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
