package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/internal/store"
	"github.com/agentbox/agentbox/internal/store/sqlstore"
)

// QueuePosition counts the pending jobs claimed before id, and id.
func (s *Store) QueuePosition(ctx context.Context, id string) (int, error) {
	var status string
	var created int64
	err := s.pool.QueryRow(ctx, "SELECT status, created_at FROM jobs WHERE id = $1", id).Scan(&status, &created)
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrNotFound
	}
	if err != nil || status != string(store.StatusPending) {
		return 0, sqlstore.Wrap("queue position of job "+id, err)
	}
	var n int
	err = s.pool.QueryRow(ctx, "SELECT COUNT(*) FROM jobs WHERE status = 'pending' AND (created_at, id) <= ($1, $2)", created, id).Scan(&n)
	return n, sqlstore.Wrap("queue position of job "+id, err)
}

// PutWorker registers or refreshes a worker.
func (s *Store) PutWorker(ctx context.Context, w store.Worker) error {
	now := time.Now()
	if w.StartedAt.IsZero() {
		w.StartedAt = now
	}
	if w.HeartbeatAt.IsZero() {
		w.HeartbeatAt = now
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO workers (id, address, capacity, running, started_at, heartbeat_at) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (id) DO UPDATE SET address = excluded.address, capacity = excluded.capacity, running = excluded.running,
started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at`,
		w.ID, w.Address, w.Capacity, w.Running, sqlstore.Nanos(w.StartedAt), sqlstore.Nanos(w.HeartbeatAt))
	return sqlstore.Wrap("put worker "+w.ID, err)
}

// Workers lists the workers by ID.
func (s *Store) Workers(ctx context.Context) ([]store.Worker, error) {
	rows, err := s.pool.Query(ctx, "SELECT id, address, capacity, running, started_at, heartbeat_at FROM workers ORDER BY id")
	if err != nil {
		return nil, sqlstore.Wrap("list workers", err)
	}
	defer rows.Close()
	var out []store.Worker
	for rows.Next() {
		var w store.Worker
		var started, beat int64
		if err := rows.Scan(&w.ID, &w.Address, &w.Capacity, &w.Running, &started, &beat); err != nil {
			return nil, sqlstore.Wrap("list workers", err)
		}
		w.StartedAt, w.HeartbeatAt = sqlstore.FromNanos(started), sqlstore.FromNanos(beat)
		out = append(out, w)
	}
	return out, sqlstore.Wrap("list workers", rows.Err())
}

// RemoveWorker removes a worker's entry.
func (s *Store) RemoveWorker(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, "DELETE FROM workers WHERE id = $1", id)
	return sqlstore.Wrap("remove worker "+id, err)
}
