package jobs

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
)

// Bounds of the wait before subscribing again to a store's notes.
const (
	minResubscribe = 100 * time.Millisecond
	maxResubscribe = 5 * time.Second
)

// Feed is a process's live feed of its jobs: it appends their events and
// wakes the followers of a job's log (Service.WaitEvents, a running
// proxy's policy) when events are appended in this process, or in another
// one whose notes the store passes on (Run); it wakes the claim loop when
// a job may be pending; and it hands a policy change made here to the
// job's running proxy (Service.WatchNetwork). Followers re-read the
// store: a missed wake costs one poll. wiring makes one per process and
// gives it to the Service and the Scheduler; an API replica has a Feed
// and a Service, no Scheduler.
type Feed struct {
	store store.Store
	log   *slog.Logger
	// pending wakes the claim loop of the process's scheduler, if any.
	pending chan struct{}
	net     netWatchers

	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

// NewFeed returns the feed of the jobs of st; log (nil: none) is told
// when the store's notes are lost.
func NewFeed(st store.Store, log *slog.Logger) *Feed {
	return &Feed{store: st, log: cmp.Or(log, slog.New(slog.DiscardHandler)), pending: make(chan struct{}, 1),
		subs: map[string]map[chan struct{}]struct{}{}}
}

// emit appends an event and wakes its followers. Event writes are part of
// the audit trail; a failure is returned to callers that can act on it.
func (f *Feed) emit(ctx context.Context, id string, p event.Payload) error {
	_, err := f.append(ctx, id, p)
	return err
}

// append is emit, returning the event as stored.
func (f *Feed) append(ctx context.Context, id string, p event.Payload) (store.Event, error) {
	typ, b, err := event.Marshal(p)
	if err != nil {
		return store.Event{}, err
	}
	ev, err := f.store.AppendEvent(context.WithoutCancel(ctx), id, typ, b)
	if err != nil {
		return ev, fmt.Errorf("event %s: %w", typ, err)
	}
	f.notify(id)
	return ev, nil
}

// subscribe returns a channel that receives a wake when job id's log may
// have grown, until stop.
func (f *Feed) subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	if f.subs[id] == nil {
		f.subs[id] = map[chan struct{}]struct{}{}
	}
	f.subs[id][ch] = struct{}{}
	f.mu.Unlock()
	return ch, func() {
		f.mu.Lock()
		delete(f.subs[id], ch)
		if len(f.subs[id]) == 0 {
			delete(f.subs, id)
		}
		f.mu.Unlock()
	}
}

// notify wakes the followers of job id.
func (f *Feed) notify(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	poke(f.subs[id])
}

// notifyAll wakes every follower, after events may have gone unannounced.
func (f *Feed) notifyAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, subs := range f.subs {
		poke(subs)
	}
}

func poke(subs map[chan struct{}]struct{}) {
	for ch := range subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// wake tells the claim loop there may be work.
func (f *Feed) wake() {
	select {
	case f.pending <- struct{}{}:
	default:
	}
}

// Run turns the notes of a store several processes share (store.Notifier)
// into wake-ups until ctx ends: a job made pending by any process wakes
// the claim loop, an event appended by any process wakes its followers.
// A store without notes (SQLite) is not followed: the process wakes
// itself. Notes missed while no subscription is up are made up for by
// waking everything on each subscription: the woken re-read the store.
func (f *Feed) Run(ctx context.Context) {
	n, ok := f.store.(store.Notifier)
	if !ok {
		return
	}
	wait := minResubscribe
	for ctx.Err() == nil {
		began := time.Now()
		notes, err := n.Subscribe(ctx)
		if err == nil {
			f.wake()
			f.notifyAll()
			f.takeNotes(ctx, notes)
		}
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > maxResubscribe {
			wait = minResubscribe
		}
		f.log.Warn("store notes: subscription ended; subscribing again", "err", err, "in", wait)
		sleep(ctx, wait)
		wait = min(2*wait, maxResubscribe)
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// tick calls fn every d until ctx ends or fn returns false.
func tick(ctx context.Context, d time.Duration, fn func() (goOn bool)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !fn() {
				return
			}
		}
	}
}

// takeNotes acts on notes until the subscription or ctx ends.
func (f *Feed) takeNotes(ctx context.Context, notes <-chan store.Note) {
	for {
		select {
		case n, ok := <-notes:
			if !ok {
				return
			}
			switch n.Kind {
			case store.NotePending:
				f.wake()
			case store.NoteEvent:
				f.notify(n.JobID)
			}
		case <-ctx.Done():
			return
		}
	}
}
