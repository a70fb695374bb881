package wiring

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestGuestWatch runs the watchdog against scripted health checks: only
// enough failures in a row give up, and only the watchdog's giving up is
// reported as ErrStoppedAnswering.
func TestGuestWatch(t *testing.T) {
	fail := errors.New("no answer")
	hang := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	tests := []struct {
		name       string
		check      func(ctx context.Context, n int64) error // n counts from 1
		callFor    time.Duration                            // how long the call runs unless cancelled
		wantGiveUp bool
	}{
		{"healthy", func(context.Context, int64) error { return nil }, 300 * time.Millisecond, false},
		{"failing", func(context.Context, int64) error { return fail }, time.Minute, true},
		{"hanging", func(ctx context.Context, _ int64) error { return hang(ctx) }, time.Minute, true},
		{"failures not in a row", func(_ context.Context, n int64) error {
			if n%3 == 0 {
				return nil
			}
			return fail
		}, 500 * time.Millisecond, false},
	}
	w := guestWatch{interval: 20 * time.Millisecond, failures: 3}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var checks atomic.Int64
			check := func(ctx context.Context) error { return tt.check(ctx, checks.Add(1)) }
			begin := time.Now()
			err := w.watched(context.Background(), check, func(ctx context.Context) error {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(tt.callFor):
					return nil
				}
			})
			took := time.Since(begin)
			if got := errors.Is(err, ErrStoppedAnswering); got != tt.wantGiveUp {
				t.Fatalf("err = %v after %v and %d checks, want giving up %v", err, took, checks.Load(), tt.wantGiveUp)
			}
			if tt.wantGiveUp && (took > 5*time.Second || !strings.Contains(err.Error(), "3 health checks")) {
				t.Errorf("gave up after %v with %v", took, err)
			}
			if !tt.wantGiveUp && err != nil {
				t.Errorf("err = %v", err)
			}
		})
	}
}

// TestGuestWatchInterruptIsNotGivingUp: Ctrl-C while the checks fail is an
// interrupt, and the watchdog has stopped when watched returns.
func TestGuestWatchInterruptIsNotGivingUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var returned, after atomic.Bool
	w := guestWatch{interval: 10 * time.Millisecond, failures: 1000}
	err := w.watched(ctx, func(context.Context) error {
		if returned.Load() {
			after.Store(true)
		}
		return errors.New("no answer")
	}, func(ctx context.Context) error {
		time.AfterFunc(100*time.Millisecond, cancel)
		<-ctx.Done()
		return ctx.Err()
	})
	returned.Store(true)
	time.Sleep(50 * time.Millisecond)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrStoppedAnswering) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if after.Load() {
		t.Error("the watchdog checked after watched returned")
	}
}
