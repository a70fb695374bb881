package jobs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestDiffSlots: no more than Diffs diffs are made at once; one more
// waits until a slot is given back, or until its request ends, saying
// what it waited for.
func TestDiffSlots(t *testing.T) {
	r := &Repos{Diffs: 2}
	ctx := t.Context()
	var held []func()
	for range 2 {
		release, err := r.acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, release)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := r.acquire(short); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "AGENTBOX_GIT_DIFFS") {
		t.Fatalf("a third diff at once: %v; want it to wait, then fail with its request naming AGENTBOX_GIT_DIFFS", err)
	}
	got := make(chan error, 1)
	go func() {
		release, err := r.acquire(ctx)
		if err == nil {
			release()
		}
		got <- err
	}()
	held[0]()
	if err := <-got; err != nil {
		t.Fatalf("a diff waiting for a slot given back: %v", err)
	}
	held[1]()
}
