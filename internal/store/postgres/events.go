package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlstore"
)

// AppendEvent adds an event to job jobID's log with the next sequence
// number, timestamped now. payload must be valid JSON or empty. It is one
// statement, committed on its own.
func (s *Store) AppendEvent(ctx context.Context, jobID, typ string, payload json.RawMessage) (store.Event, error) {
	evs, err := appendAll(ctx, s.pool, jobID, []store.Entry{{Type: typ, Payload: payload}})
	if err != nil {
		return store.Event{}, fmt.Errorf("append event to job %s: %w", jobID, err)
	}
	return evs[0], nil
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// appendAll appends entries to job jobID's log through q.
func appendAll(ctx context.Context, q querier, jobID string, entries []store.Entry) ([]store.Event, error) {
	var evs []store.Event
	for _, e := range entries {
		ev, err := sqlstore.NewEvent(jobID, e)
		if err != nil {
			return nil, err
		}
		row := q.QueryRow(ctx, appendEventSQL, jobID, sqlstore.Nanos(ev.Time), e.Type, sqlstore.Payload(ev.Payload))
		if err := dbErr(row.Scan(&ev.Seq)); err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// Events returns up to limit events of job jobID with Seq > after, in
// order. limit ≤ 0 means DefaultEventsLimit; at most MaxEventsLimit come
// back. A job that does not exist is ErrNotFound.
func (s *Store) Events(ctx context.Context, jobID string, after int64, limit int) ([]store.Event, error) {
	if limit <= 0 {
		limit = sqlstore.DefaultEventsLimit
	}
	evs, err := s.events(ctx, jobID, after, min(limit, sqlstore.MaxEventsLimit))
	if err == nil && len(evs) == 0 {
		err = s.exists(ctx, jobID)
	}
	if err != nil {
		return nil, fmt.Errorf("events of job %s: %w", jobID, err)
	}
	return evs, nil
}

func (s *Store) events(ctx context.Context, jobID string, after int64, limit int) ([]store.Event, error) {
	rows, err := s.pool.Query(ctx, eventsSQL, jobID, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Event, error) {
		ev := store.Event{JobID: jobID}
		var t int64
		var payload *string
		if err := r.Scan(&ev.Seq, &t, &ev.Type, &payload); err != nil {
			return ev, err
		}
		ev.Time = sqlstore.FromNanos(t)
		if payload != nil {
			ev.Payload = json.RawMessage(*payload)
		}
		return ev, nil
	})
}

// exists is nil if job id exists, ErrNotFound if not.
func (s *Store) exists(ctx context.Context, id string) error {
	var one int
	return dbErr(s.pool.QueryRow(ctx, jobExistsSQL, id).Scan(&one))
}

// LastSeq returns the seq of job jobID's last event, 0 if it has none; a
// job that does not exist is ErrNotFound. It reads the job's row.
func (s *Store) LastSeq(ctx context.Context, jobID string) (int64, error) {
	var seq int64
	if err := s.pool.QueryRow(ctx, lastSeqSQL, jobID).Scan(&seq); err != nil {
		return 0, fmt.Errorf("last event of job %s: %w", jobID, dbErr(err))
	}
	return seq, nil
}
