package jobs

import (
	"context"
	"time"

	"github.com/agentbox/agentbox/internal/store"
)

// Bounds of the wait before subscribing again to a store's notes.
const (
	minResubscribe = 100 * time.Millisecond
	maxResubscribe = 5 * time.Second
)

// followNotes turns the notes of a store several processes share
// (store.Notifier) into wake-ups until ctx ends: a job made pending by any
// process wakes the claim loop, an event appended by any process wakes
// its followers (Service.WaitEvents). A store without notes (SQLite) is
// not followed: the process wakes itself. Notes missed while no
// subscription is up are made up for by waking everything on each
// subscription: the woken re-read the store.
func (s *Scheduler) followNotes(ctx context.Context) {
	n, ok := s.store.(store.Notifier)
	if !ok {
		return
	}
	wait := minResubscribe
	for ctx.Err() == nil {
		began := time.Now()
		notes, err := n.Subscribe(ctx)
		if err == nil {
			s.wake()
			s.hub.notifyAll()
			s.takeNotes(ctx, notes)
		}
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > maxResubscribe {
			wait = minResubscribe
		}
		s.log.Warn("store notes: subscription ended; subscribing again", "err", err, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		wait = min(2*wait, maxResubscribe)
	}
}

// takeNotes acts on notes until the subscription or ctx ends.
func (s *Scheduler) takeNotes(ctx context.Context, notes <-chan store.Note) {
	for {
		select {
		case n, ok := <-notes:
			if !ok {
				return
			}
			switch n.Kind {
			case store.NotePending:
				s.wake()
			case store.NoteEvent:
				s.hub.notify(n.JobID)
			}
		case <-ctx.Done():
			return
		}
	}
}
