package pgblobs

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentbox/agentbox/internal/blobs"
)

var _ blobs.Batcher = (*Store)(nil)

// The statements of a batch, which take their row locks in Put's order,
// chunks first, then objects, each sorted by digest: a batch that took an
// object's row before its chunk's deadlocked with a Put of the same blob
// (one waited on the other's chunk, the other on its object).
const (
	// batchChunks inserts the one chunk of each non-empty blob the
	// namespace lacks; a digest twice in the batch is one blob.
	batchChunks = `INSERT INTO blob_chunks (ns, digest, seq, data)
SELECT DISTINCT ON (t.d) $1, t.d, 0, t.data FROM unnest($2::text[], $3::bytea[]) AS t(d, data)
WHERE length(t.data) > 0
  AND NOT EXISTS (SELECT 1 FROM blob_objects o WHERE o.ns = $1 AND o.digest = t.d)
ORDER BY t.d
ON CONFLICT DO NOTHING`
	// batchObjects inserts the rows of the blobs whose chunk is there, and
	// counts those it inserted and their bytes.
	batchObjects = `WITH objs AS (
  INSERT INTO blob_objects (ns, digest, size, chunks)
  SELECT DISTINCT ON (t.d) $1, t.d, t.sz, t.c FROM unnest($2::text[], $3::bigint[], $4::int[]) AS t(d, sz, c)
  WHERE t.c = 0 OR EXISTS (SELECT 1 FROM blob_chunks k WHERE k.ns = $1 AND k.digest = t.d AND k.seq = 0)
  ORDER BY t.d
  ON CONFLICT DO NOTHING
  RETURNING digest, size
)
SELECT count(*), coalesce(sum(size), 0)::bigint FROM objs`
	// batchMissing counts the blobs that have no row yet: a chunk another
	// Put wrote was removed, with its namespace, while the batch ran.
	batchMissing = `SELECT count(*) FROM unnest($2::text[]) AS t(d)
WHERE NOT EXISTS (SELECT 1 FROM blob_objects o WHERE o.ns = $1 AND o.digest = t.d)`
)

// PutBatch inserts the blobs' one chunk each, then their rows, in one
// transaction (so each is seen whole or not at all) and one round trip,
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
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("put a batch: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	q := &pgx.Batch{}
	q.Queue("SET LOCAL synchronous_commit = off")
	q.Queue(lockShared, ns)
	q.Queue(batchChunks, ns, digests, data)
	var added, missing int
	var n int64
	q.Queue(batchObjects, ns, digests, sizes, chunks).QueryRow(func(r pgx.Row) error { return r.Scan(&added, &n) })
	q.Queue(batchMissing, ns, digests).QueryRow(func(r pgx.Row) error { return r.Scan(&missing) })
	err = tx.SendBatch(ctx, q).Close()
	if err == nil && missing > 0 {
		err = fmt.Errorf("%d blobs not whole: namespace %s removed while put", missing, ns)
	}
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("put a batch of %d blobs: %w", len(bs), err)
	}
	return added, n, nil
}
