package main

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// TestBenchCheckpoint runs `agentbox bench checkpoint` small, into a
// directory store and into PostgreSQL: each 1-file change uploads one
// blob and the trees of its directory and the root, and the docker exec
// tar baseline runs.
func TestBenchCheckpoint(t *testing.T) {
	testenv.DockerWithImage(t)
	for blobs, store := range map[string]string{"": "blobs in a directory store.", testenv.Postgres(t): "blobs in PostgreSQL at postgres://"} {
		out, errOut, err := run(t.Context(), "bench", "checkpoint", "--files", "300", "--rounds", "4", "--blobs", blobs)
		if err != nil {
			t.Fatalf("bench checkpoint --blobs %q: %v\n%s%s", blobs, err, out, errOut)
		}
		for _, want := range []string{"A workspace of 300 files (320 entries), 4 rounds", "| checkpoint after a 1-file change |",
			"(4 blobs in 4 rounds)", "(8 trees in 4 rounds)", "`docker exec C tar", "faster.", store} {
			if !strings.Contains(out, want) {
				t.Errorf("--blobs %q: output lacks %q:\n%s", blobs, want, out)
			}
		}
	}
}
