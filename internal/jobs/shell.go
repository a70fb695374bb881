package jobs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/guest"
	"github.com/agentbox/agentbox/internal/store"
)

// ShellAgent runs a job's task text as a bash script in its sandbox. It is
// the stand-in for the model-driven agent, behind the same Agent seam.
type ShellAgent struct{}

var _ Agent = ShellAgent{}

// Run executes the task, streaming its output into the event log.
func (ShellAgent) Run(ctx context.Context, r *Run) (Outcome, error) {
	r.Emit(ctx, event.Command{Command: r.Job.Task})
	req := guest.Shell(r.Job.Task)
	if dl, ok := ctx.Deadline(); ok {
		req.TimeoutMS = max(time.Until(dl).Milliseconds(), 1)
	}
	out := newOutputBatcher(func(p event.Output) { r.Emit(context.WithoutCancel(ctx), p) })
	res, err := r.Sandbox.Guest().ExecStream(ctx, req, out.write)
	out.close()
	if err != nil {
		return Outcome{}, fmt.Errorf("run task: %w", err)
	}
	r.Emit(ctx, event.Exit{ExitCode: res.ExitCode, DurationMS: res.DurationMS,
		TimedOut: res.TimedOut, Truncated: res.Truncated, OOMKilled: res.OOMKilled})
	if res.ExitCode != 0 {
		return Outcome{Status: store.StatusError, Steps: 1, Error: fmt.Sprintf("task script exited %d", res.ExitCode)}, nil
	}
	return Outcome{Status: store.StatusComplete, Steps: 1, Result: "task script exited 0"}, nil
}

// outputBatcher turns a command's output chunks into output events, at most
// one per stream every 100ms or 32 KiB, so a chatty command does not cost
// one durable write per line.
type outputBatcher struct {
	emit func(event.Output)
	mu   sync.Mutex
	buf  map[string][]byte
	stop chan struct{}
	done chan struct{}
}

func newOutputBatcher(emit func(event.Output)) *outputBatcher {
	b := &outputBatcher{emit: emit, buf: map[string][]byte{}, stop: make(chan struct{}), done: make(chan struct{})}
	go b.loop()
	return b
}

func (b *outputBatcher) write(stream string, p []byte) {
	b.mu.Lock()
	b.buf[stream] = append(b.buf[stream], p...)
	full := len(b.buf[stream]) >= 32<<10
	b.mu.Unlock()
	if full {
		b.flush()
	}
}

func (b *outputBatcher) loop() {
	defer close(b.done)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			b.flush()
		case <-b.stop:
			b.flush()
			return
		}
	}
}

func (b *outputBatcher) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, stream := range []string{"stdout", "stderr"} {
		if p := b.buf[stream]; len(p) > 0 {
			b.emit(event.Output{Stream: stream, Text: string(p)})
			b.buf[stream] = nil
		}
	}
}

func (b *outputBatcher) close() {
	close(b.stop)
	<-b.done
}
