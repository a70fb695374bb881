package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentbox/agentbox/internal/event"
	"github.com/agentbox/agentbox/internal/store"
)

// ErrBadMessage means a message to a job was refused: empty, too long,
// not UTF-8, or sent to a server whose agent holds no conversation.
var ErrBadMessage = errors.New("message refused")

// errTurnMoved means the job is no longer at the end of the turn the
// caller saw end: another caller started the next turn first.
var errTurnMoved = errors.New("turn moved on")

// Reply adds the user's message to job id's conversation and returns the
// job and the message's event.
//
// On an ended job it starts the job's next turn in the same workspace: the
// job goes back to pending, its turn counted one up and its attempts,
// error, result and end cleared (steps and usage go on adding up), and a
// worker runs it again, in a new sandbox, with the whole conversation. On
// a pending or running job the agent is given the message at its next
// step boundary. If the turn ends before the agent read the message, the
// message starts the next turn, unless the turn was canceled.
//
// ErrBadMessage for a message refused, ErrDeleted for a job whose data was
// removed, store.ErrNotFound for an unknown job.
func (s *Service) Reply(ctx context.Context, id, text string) (store.Job, store.Event, error) {
	if err := s.checkMessage(text); err != nil {
		return store.Job{}, store.Event{}, err
	}
	var steer store.Job
	j, evs, err := s.store.UpdateJobLogged(ctx, id, func(j *store.Job) ([]store.Entry, error) {
		if !j.Status.Final() {
			steer = *j
			return nil, errTurnMoved // nothing to change: the turn goes on
		}
		if err := nextTurn(j); err != nil {
			return nil, err
		}
		return entries(event.Message{Text: text, Turn: j.Turn},
			event.State{Status: store.StatusPending, Reason: fmt.Sprintf("a follow-up message starts turn %d", j.Turn)})
	})
	if err == nil {
		s.feed.notify(id)
		s.feed.wake()
		return j, evs[0], nil
	}
	if !errors.Is(err, errTurnMoved) {
		return j, store.Event{}, err
	}
	ev, err := s.feed.append(ctx, id, event.Message{Text: text, Turn: steer.Turn})
	if err != nil {
		return steer, ev, fmt.Errorf("reply to job %s: %w", id, err)
	}
	j, err = s.catchUp(ctx, steer, ev.Seq)
	return j, ev, err
}

// entries encodes events to append with a job's change.
func entries(ps ...event.Payload) ([]store.Entry, error) {
	out := make([]store.Entry, 0, len(ps))
	for _, p := range ps {
		typ, b, err := event.Marshal(p)
		if err != nil {
			return nil, err
		}
		out = append(out, store.Entry{Type: typ, Payload: b})
	}
	return out, nil
}

// checkMessage refuses what Reply must not add to a conversation.
func (s *Service) checkMessage(text string) error {
	switch {
	case s.noMessages != "":
		return fmt.Errorf("%w: %s", ErrBadMessage, s.noMessages)
	case strings.TrimSpace(text) == "":
		return fmt.Errorf("%w: message is empty", ErrBadMessage)
	case len(text) > MaxTaskBytes || !utf8.ValidString(text):
		return fmt.Errorf("%w: message must be UTF-8 text of at most %d bytes", ErrBadMessage, MaxTaskBytes)
	}
	return nil
}

// nextTurn puts an ended job back to pending for its next turn, unless its
// data was removed. It runs inside the store's transaction, which logs the
// turn's message and pending state with it (so a worker that claims the job
// finds them in its history), and in which the retention janitor marks a
// job deleted only if it has ended: the two never both win.
func nextTurn(j *store.Job) error {
	if !j.DeletedAt.IsZero() {
		return fmt.Errorf("%w: the workspace of job %s was removed at %s (DELETE, or the retention period); it cannot be continued",
			ErrDeleted, j.ID, j.DeletedAt.UTC().Format(time.RFC3339))
	}
	j.Status, j.Turn, j.Attempts = store.StatusPending, max(j.Turn, 1)+1, 0
	j.Error, j.Result, j.EndedAt, j.CancelRequested = "", "", time.Time{}, false
	// The turn's sandbox was destroyed when it ended: the next one is new.
	j.LeaseOwner, j.LeaseUntil, j.Sandbox = "", time.Time{}, nil
	return nil
}

// startTurn starts the turn after turn, if the job still stands at its
// end (an end other than canceled), and logs its pending state with it;
// started is false when it does not. The caller wakes the workers.
func startTurn(ctx context.Context, f *Feed, id string, turn int) (j store.Job, started bool, err error) {
	j, _, err = f.store.UpdateJobLogged(ctx, id, func(j *store.Job) ([]store.Entry, error) {
		if !j.Status.Final() || j.Status == store.StatusCanceled || j.Turn != turn {
			return nil, errTurnMoved
		}
		if err := nextTurn(j); err != nil {
			return nil, err
		}
		return entries(event.State{Status: store.StatusPending,
			Reason: fmt.Sprintf("a message came as turn %d ended; it starts turn %d", turn, j.Turn)})
	})
	if errors.Is(err, errTurnMoved) || errors.Is(err, ErrDeleted) {
		return j, false, nil
	}
	if err == nil {
		f.notify(id)
	}
	return j, err == nil, err
}

// catchUp starts the next turn for a message sent to a running job whose
// turn ended before the model was given it: the message came as the last
// step was torn down. The worker looks for such messages too once it has
// recorded the end (see Scheduler.lateMessages), which it does with the
// final state event: whichever of the two looks second finds the turn
// started, and the pending state always follows the end in the log.
func (s *Service) catchUp(ctx context.Context, was store.Job, seq int64) (store.Job, error) {
	j, err := s.store.GetJob(ctx, was.ID)
	if err != nil || !j.Status.Final() || j.Status == store.StatusCanceled || j.Turn != was.Turn {
		return j, err
	}
	if given, err := s.given(ctx, j.ID, seq); err != nil || given {
		return j, err
	}
	next, started, err := startTurn(ctx, s.feed, j.ID, j.Turn)
	if err != nil || !started {
		return j, err
	}
	s.feed.wake()
	return next, nil
}

// given reports whether the model was given message seq: a model event
// after it says it was read (event.Model's Seen).
func (s *Service) given(ctx context.Context, id string, seq int64) (bool, error) {
	for after := seq; ; {
		evs, err := s.store.Events(ctx, id, after, 1000)
		if err != nil || len(evs) == 0 {
			return false, err
		}
		for _, ev := range evs {
			if m, ok := event.As[event.Model](ev.Type, ev.Payload); ok && m.Seen >= seq {
				return true, nil
			}
		}
		after = lastSeq(evs)
	}
}

// Messages returns the user's messages logged after seq after and the seq
// of the last event it read, which the next call passes as after. An agent
// calls it at each step boundary; a message it returns is the agent's to
// give the model.
func (r *Run) Messages(ctx context.Context, after int64) ([]event.Message, int64, error) {
	var msgs []event.Message
	for r.events != nil {
		evs, err := r.events(ctx, after, 1000)
		if err != nil {
			return msgs, after, fmt.Errorf("read messages: %w", err)
		}
		if len(evs) == 0 {
			break
		}
		msgs = append(msgs, messagesIn(evs)...)
		after = lastSeq(evs)
	}
	return msgs, after, nil
}

func messagesIn(evs []store.Event) []event.Message {
	var msgs []event.Message
	for _, ev := range evs {
		if m, ok := event.As[event.Message](ev.Type, ev.Payload); ok {
			msgs = append(msgs, m)
		}
	}
	return msgs
}

// lateMessages starts the job's next turn when a message came after the
// agent last read the log (seen) and before the turn's end was recorded:
// the user spoke, and no step was left to hear it.
func (s *Scheduler) lateMessages(ctx context.Context, j store.Job, seen int64) {
	r := &Run{events: func(ctx context.Context, after int64, limit int) ([]store.Event, error) {
		return s.store.Events(ctx, j.ID, after, limit)
	}}
	msgs, _, err := r.Messages(ctx, seen)
	if err != nil {
		s.log.Error("look for late messages", "job_id", j.ID, "err", err)
	}
	if len(msgs) == 0 {
		return
	}
	next, started, err := startTurn(ctx, s.feed, j.ID, j.Turn)
	if err != nil || !started {
		return
	}
	s.log.Info("a late message starts the job's next turn", "job_id", j.ID, "turn", next.Turn)
	s.feed.wake()
}
