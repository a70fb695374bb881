package wiring

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrStoppedAnswering is the cause a Scratch's command is cancelled with
// when the guest fails its health checks: the command's stream would
// otherwise wait for a frozen guest until the command's timeout plus a
// minute.
var ErrStoppedAnswering = errors.New("the sandbox stopped answering")

// guestWatch is how a Scratch's watchdog checks the guest: a check every
// interval, each given interval to answer; failures failed checks in a row
// end the command. The idea of the scheduler's watchdog in internal/jobs,
// copied: a CLI command has no scheduler.
type guestWatch struct {
	interval time.Duration
	failures int
}

// execWatch is the watchdog `agentbox exec` runs. It gives up on a frozen
// guest 6 to 8 s after it froze; a guest merely starved of CPU by its own
// command answers within 2 s unless the sandbox is all but unusable.
var execWatch = guestWatch{interval: 2 * time.Second, failures: 3}

// run calls check until ctx ends, and cancels the command with
// ErrStoppedAnswering (wrapping the last check's error) after w.failures
// failed checks in a row. A check that fails because ctx ended does not
// count: the command finished or was interrupted.
func (w guestWatch) run(ctx context.Context, cancel context.CancelCauseFunc, check func(context.Context) error) {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		hctx, hcancel := context.WithTimeout(ctx, w.interval)
		err := check(hctx)
		hcancel()
		if err == nil || ctx.Err() != nil {
			failures = 0
			continue
		}
		if failures++; failures >= w.failures {
			cancel(fmt.Errorf("%w (%d health checks in a row failed, the last: %w)", ErrStoppedAnswering, failures, err))
			return
		}
	}
}

// watched runs call while w checks the guest with check. call's context is
// cancelled with the watchdog's cause if the guest stops answering, and that
// cause is returned; the watchdog goroutine has ended when watched returns.
func (w guestWatch) watched(ctx context.Context, check, call func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	wctx, stopWatch := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.run(wctx, cancel, check)
	}()
	err := call(ctx)
	stopWatch()
	<-done
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, ErrStoppedAnswering) {
		return cause
	}
	return err
}
