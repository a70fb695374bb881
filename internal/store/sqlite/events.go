package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlstore"
)

// Page sizes of Events.
const (
	DefaultEventsLimit = sqlstore.DefaultEventsLimit
	MaxEventsLimit     = sqlstore.MaxEventsLimit
)

// AppendEvent adds an event to job jobID's log with the next sequence
// number, timestamped now. payload must be valid JSON or empty.
func (s *Store) AppendEvent(ctx context.Context, jobID, typ string, payload json.RawMessage) (store.Event, error) {
	var evs []store.Event
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		evs, err = s.appendAll(ctx, tx, jobID, []store.Entry{{Type: typ, Payload: payload}})
		return err
	})
	if err != nil {
		return store.Event{}, fmt.Errorf("append event to job %s: %w", jobID, err)
	}
	return evs[0], nil
}

// appendAll appends entries to job jobID's log inside tx.
func (s *Store) appendAll(ctx context.Context, tx *sql.Tx, jobID string, entries []store.Entry) ([]store.Event, error) {
	var evs []store.Event
	for _, e := range entries {
		ev, err := sqlstore.NewEvent(jobID, e)
		if err != nil {
			return nil, err
		}
		row := tx.StmtContext(ctx, s.stmts.appendEvent).QueryRowContext(ctx, jobID, nanos(ev.Time), e.Type, sqlstore.Payload(ev.Payload))
		if err := notFound(row.Scan(&ev.Seq)); err != nil {
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
		limit = DefaultEventsLimit
	}
	evs, err := s.events(ctx, jobID, after, min(limit, MaxEventsLimit))
	if err == nil && len(evs) == 0 {
		err = s.exists(ctx, jobID)
	}
	if err != nil {
		return nil, fmt.Errorf("events of job %s: %w", jobID, err)
	}
	return evs, nil
}

func (s *Store) events(ctx context.Context, jobID string, after int64, limit int) ([]store.Event, error) {
	rows, err := s.stmts.events.QueryContext(ctx, jobID, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var evs []store.Event
	for rows.Next() {
		ev := store.Event{JobID: jobID}
		var t int64
		var payload sql.NullString
		if err := rows.Scan(&ev.Seq, &t, &ev.Type, &payload); err != nil {
			return nil, err
		}
		ev.Time = fromNanos(t)
		if payload.Valid {
			ev.Payload = json.RawMessage(payload.String)
		}
		evs = append(evs, ev)
	}
	return evs, rows.Err()
}

// exists is nil if job id exists, ErrNotFound if not.
func (s *Store) exists(ctx context.Context, id string) error {
	var one int
	err := s.stmts.jobExists.QueryRowContext(ctx, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	return err
}

// LastSeq returns the seq of job jobID's last event, 0 if it has none; a
// job that does not exist is ErrNotFound. It reads one index entry.
func (s *Store) LastSeq(ctx context.Context, jobID string) (int64, error) {
	var seq int64
	err := s.r.QueryRowContext(ctx, lastSeqSQL, jobID).Scan(&seq)
	if err == nil && seq == 0 {
		err = s.exists(ctx, jobID)
	}
	if err != nil {
		return 0, fmt.Errorf("last event of job %s: %w", jobID, err)
	}
	return seq, nil
}
