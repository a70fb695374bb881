package pgblobs

import (
	"context"
	"fmt"

	"github.com/agentbox/agentbox/internal/blobs"
)

var _ blobs.Batcher = (*Store)(nil)

// PutBatch inserts the blobs' rows and their one chunk each in one
// statement, in one transaction (so each is seen whole or not at all),
// skipping those the namespace holds; durable at the next ref, as Put.
func (s *Store) PutBatch(ctx context.Context, ns string, bs []blobs.Blob) (int, int64, error) {
	if err := blobs.CheckBatch(ns, bs); err != nil {
		return 0, 0, err
	}
	if len(bs) == 0 {
		return 0, 0, nil
	}
	digests, sizes, chunks, data := make([]string, len(bs)), make([]int64, len(bs)), make([]int32, len(bs)), make([][]byte, len(bs))
	for i, b := range bs {
		digests[i], sizes[i], data[i] = b.Digest, int64(len(b.Data)), b.Data
		if len(b.Data) > 0 {
			chunks[i] = 1
		}
	}
	// New objects are inserted first and return their digests; only
	// theirs get a chunk row. A digest twice in the batch is one object.
	const q = `WITH objs AS (
  INSERT INTO blob_objects (ns, digest, size, chunks)
  SELECT DISTINCT ON (d) $1, d, sz, c FROM unnest($2::text[], $3::bigint[], $4::int[]) AS t(d, sz, c)
  ON CONFLICT DO NOTHING
  RETURNING digest, size
), ch AS (
  INSERT INTO blob_chunks (ns, digest, seq, data)
  SELECT DISTINCT ON (t.d) $1, t.d, 0, t.data FROM unnest($2::text[], $5::bytea[]) AS t(d, data)
  JOIN objs ON objs.digest = t.d
  WHERE length(t.data) > 0
  ON CONFLICT DO NOTHING
)
SELECT count(*), coalesce(sum(size), 0)::bigint FROM objs`
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("put a batch: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var added int
	var n int64
	_, err = tx.Exec(ctx, "SET LOCAL synchronous_commit = off")
	if err == nil {
		err = tx.QueryRow(ctx, q, ns, digests, sizes, chunks, data).Scan(&added, &n)
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("put a batch of %d blobs: %w", len(bs), err)
	}
	return added, n, nil
}
